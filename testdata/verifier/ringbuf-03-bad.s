#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel reject "Unreleased reference"
#! rule ringbuf
#! note never submitted
lddw %r1, map_idx(0)
mov %r2, 8
mov %r3, 0
call 131              # bpf_ringbuf_reserve
jeq %r0, 0, out
stdw [%r0+0], 1
out:
mov %r0, 0
exit
