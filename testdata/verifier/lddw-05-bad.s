#! type xdp
#! map rb ringbuf key=0 value=0 entries=4096
#! kernel reject "no direct value access support for this map type"
#! rule lddw
#! note direct value access of a ring buffer
lddw %r1, map_idx_value(0, 0)
mov %r0, 0
exit
