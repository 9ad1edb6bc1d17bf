#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel reject "invalid access to memory"
#! rule ringbuf
#! note past the reserved 8 bytes
lddw %r1, map_idx(0)
mov %r2, 8
mov %r3, 0
call 131              # bpf_ringbuf_reserve
jeq %r0, 0, out
stdw [%r0+8], 1
mov %r1, %r0
mov %r2, 0
call 132
out:
mov %r0, 0
exit
