#! type xdp
#! kernel reject "invalid bpf_context access"
#! rule ctx-read
#! note xdp_md allows no narrow loads
ldxb %r0, [%r1+12]
exit
