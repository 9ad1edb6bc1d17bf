#! type xdp
#! map g array key=4 value=16 entries=2
#! kernel reject "invalid access to map value pointer, value_size=16 off=0"
#! rule map-global
#! note direct value access needs a single-entry array
lddw %r1, map_idx_value(0, 0)
mov %r0, 0
exit
