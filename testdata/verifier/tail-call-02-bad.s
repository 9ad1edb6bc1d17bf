#! type xdp
#! map progs prog_array key=4 value=4 entries=4
#! kernel reject "R1 type=fp expected=ctx"
#! rule tail-call
mov %r1, %r10
lddw %r2, map_idx(0)
mov %r3, 0
call 12
mov %r0, 0
exit
