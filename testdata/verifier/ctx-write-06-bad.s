#! type sched_cls
#! kernel reject "invalid bpf_context access"
#! rule ctx-write
#! note ifindex is read-only
mov %r2, 7
stxw [%r1+40], %r2
mov %r0, 0
exit
