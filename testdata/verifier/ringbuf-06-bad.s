#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel reject "ringbuf_mem_or_null"
#! rule ringbuf
#! note submitted before the null check
lddw %r1, map_idx(0)
mov %r2, 8
mov %r3, 0
call 131              # bpf_ringbuf_reserve
mov %r1, %r0
mov %r2, 0
call 132
mov %r0, 0
exit
