#! type sched_cls
#! kernel reject "invalid bpf_context access"
#! rule ctx-write
#! note len is read-only
mov %r2, 7
stxw [%r1+0], %r2
mov %r0, 0
exit
