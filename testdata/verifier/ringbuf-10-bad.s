#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel reject "R6 invalid mem access 'scalar'"
#! rule ringbuf
#! note written after submit
lddw %r1, map_idx(0)
mov %r2, 8
mov %r3, 0
call 131              # bpf_ringbuf_reserve
jeq %r0, 0, out
mov %r6, %r0
mov %r1, %r6
mov %r2, 0
call 132
stdw [%r6+0], 1
out:
mov %r0, 0
exit
