#! type sched_cls
#! kernel accept
#! rule ctx-write
#! note an immediate store into a writable field
stw [%r1+8], 1
mov %r0, 0
exit
