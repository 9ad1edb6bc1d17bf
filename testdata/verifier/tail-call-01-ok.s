#! type xdp
#! map progs prog_array key=4 value=4 entries=4
#! kernel accept
#! rule tail-call
lddw %r2, map_idx(0)
mov %r3, 0
call 12
mov %r0, 0
exit
