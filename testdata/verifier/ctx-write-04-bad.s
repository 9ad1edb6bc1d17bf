#! type xdp
#! kernel reject "invalid bpf_context access"
#! rule ctx-write
#! note xdp_md is read-only
mov %r2, 7
stxw [%r1+12], %r2
mov %r0, 0
exit
