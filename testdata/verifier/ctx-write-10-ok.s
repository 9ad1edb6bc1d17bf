#! type sched_cls
#! kernel accept
#! rule ctx-write
#! note narrow writes to cb are allowed
mov %r2, 7
stxb [%r1+49], %r2  # cb[0] byte 1
mov %r0, 0
exit
