#! type sched_cls
#! kernel reject "invalid bpf_context access"
#! rule ctx-write
#! note 8 bytes from cb[4] run past cb
mov %r2, 7
stxdw [%r1+64], %r2
mov %r0, 0
exit
