#! type xdp
#! map g array key=4 value=16 entries=1
#! kernel accept
#! rule map-global
#! note global data at offset 8
lddw %r1, map_idx_value(0, 8)
ldxdw %r0, [%r1+0]
exit
