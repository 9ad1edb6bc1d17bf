#! type sched_cls
#! kernel reject "invalid bpf_context access"
#! rule ctx-write
#! note narrow write to mark
mov %r2, 7
stxb [%r1+8], %r2
mov %r0, 0
exit
