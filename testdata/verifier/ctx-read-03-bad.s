#! type xdp
#! kernel reject "invalid bpf_context access"
#! rule ctx-read
#! note past struct xdp_md
ldxw %r0, [%r1+24]
exit
