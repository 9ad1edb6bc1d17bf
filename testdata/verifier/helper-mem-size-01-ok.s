#! type sched_cls
#! kernel accept
#! rule helper-mem-size
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 8
call 26
mov %r0, 0
exit
