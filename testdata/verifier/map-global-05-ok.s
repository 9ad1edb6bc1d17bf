#! type xdp
#! map g array key=4 value=16 entries=1
#! kernel accept
#! rule map-global
#! note writing global data
lddw %r1, map_idx_value(0, 0)
mov %r2, 5
stxdw [%r1+8], %r2
mov %r0, 0
exit
