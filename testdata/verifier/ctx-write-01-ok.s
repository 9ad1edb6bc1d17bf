#! type sched_cls
#! kernel accept
#! rule ctx-write
mov %r2, 7
stxw [%r1+8], %r2   # mark
mov %r0, 0
exit
