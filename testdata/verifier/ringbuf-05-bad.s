#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel reject "ringbuf_mem_or_null"
#! rule ringbuf
#! note written before the null check
lddw %r1, map_idx(0)
mov %r2, 8
mov %r3, 0
call 131              # bpf_ringbuf_reserve
stdw [%r0+0], 1
mov %r0, 0
exit
