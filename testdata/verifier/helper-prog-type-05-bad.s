#! type socket
#! kernel reject "bpf_skb_store_bytes"
#! rule helper-prog-type
#! note a socket filter may not write the packet
stdw [%r10-8], 0
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 8
mov %r5, 0
call 9                # bpf_skb_store_bytes
mov %r0, 0
exit
