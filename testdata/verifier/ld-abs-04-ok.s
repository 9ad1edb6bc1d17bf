#! type sched_cls
#! kernel accept
#! rule ld-abs
mov %r6, %r1
mov %r2, 2
ldindb %r2, 12
exit
