#! type sched_cls
#! map m hash key=4 value=8 entries=16
#! kernel reject "R3 type=ctx expected=fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_"
#! rule helper-arg
stw [%r10-4], 1
mov %r2, %r1
lddw %r1, map_idx(0)
mov %r3, %r2
mov %r2, %r10
add %r2, -4
mov %r4, 0
call 2
mov %r0, 0
exit
