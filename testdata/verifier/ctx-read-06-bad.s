#! type socket
#! kernel reject "invalid bpf_context access"
#! rule ctx-read
#! note misaligned
ldxw %r0, [%r1+2]
exit
