#! type sched_cls
#! kernel accept
#! rule isa-v4
#! note sign-extending load from the context
ldxhsx %r0, [%r1+16]
exit
