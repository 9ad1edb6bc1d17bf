#! type sched_cls
#! kernel accept
#! rule ctx-read
ldxw %r0, [%r1+8]     # mark
exit
