#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "bpf_ringbuf_reserve"
#! rule ringbuf
#! note reserve on a hash map
lddw %r1, map_idx(0)
mov %r2, 8
mov %r3, 0
call 131              # bpf_ringbuf_reserve
jeq %r0, 0, out
mov %r1, %r0
mov %r2, 0
call 133
out:
mov %r0, 0
exit
