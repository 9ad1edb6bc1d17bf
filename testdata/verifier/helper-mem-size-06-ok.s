#! type sched_cls
#! kernel accept
#! rule helper-mem-size
#! note size 1..8
mov %r6, %r1
call 7
and %r0, 7
add %r0, 1
mov %r4, %r0
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
call 26
mov %r0, 0
exit
