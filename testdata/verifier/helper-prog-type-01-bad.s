#! type xdp
#! kernel reject "bpf_skb_load_bytes"
#! rule helper-prog-type
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 8
call 26               # bpf_skb_load_bytes
mov %r0, 0
exit
