#! type socket
#! kernel reject "invalid bpf_context access"
#! rule ctx-write
#! note a socket filter may not write mark
mov %r2, 7
stxw [%r1+8], %r2
mov %r0, 0
exit
