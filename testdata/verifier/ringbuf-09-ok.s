#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel accept
#! rule ringbuf
stdw [%r10-8], 7
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -8
mov %r3, 8
mov %r4, 0
call 130              # bpf_ringbuf_output
mov %r0, 0
exit
