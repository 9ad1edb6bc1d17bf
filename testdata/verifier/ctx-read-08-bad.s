#! type sched_cls
#! kernel reject "invalid bpf_context access"
#! rule ctx-read
#! note 8 bytes at len
ldxdw %r0, [%r1+0]
exit
