#! type sched_cls
#! map progs prog_array key=4 value=4 entries=4
#! kernel accept
#! rule tail-call
#! note variable index
mov %r6, %r1
call 7
mov %r3, %r0
mov %r1, %r6
lddw %r2, map_idx(0)
call 12
mov %r0, 0
exit
