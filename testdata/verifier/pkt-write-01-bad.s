#! type socket
#! kernel reject "invalid bpf_context access"
#! rule pkt-write
#! note a socket filter cannot reach the packet directly
ldxw %r2, [%r1+76]
mov %r0, 0
exit
