#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel reject "R2 is not a known constant'"
#! rule ringbuf
#! note size not a constant
call 7
mov %r2, %r0
lddw %r1, map_idx(0)
mov %r3, 0
call 131
jeq %r0, 0, out
mov %r1, %r0
mov %r2, 0
call 133
out:
mov %r0, 0
exit
