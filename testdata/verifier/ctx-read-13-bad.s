#! type xdp
#! kernel reject "invalid bpf_context access"
#! rule ctx-read
#! note negative offset
ldxw %r0, [%r1-4]
exit
