#! type sched_cls
#! kernel reject "invalid bpf_context access"
#! rule ctx-read
#! note narrow load of data
ldxh %r0, [%r1+76]
exit
