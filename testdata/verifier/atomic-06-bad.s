#! type sched_cls
#! kernel reject "BPF_ATOMIC stores into R1 ctx is not allowed"
#! rule atomic
mov %r2, 1
lock add32 [%r1+8], %r2
mov %r0, 0
exit
