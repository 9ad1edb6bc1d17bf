#! type xdp
#! map g hash key=4 value=16 entries=1
#! kernel reject "no direct value access support for this map type"
#! rule map-global
#! note direct value access of a hash map
lddw %r1, map_idx_value(0, 0)
mov %r0, 0
exit
