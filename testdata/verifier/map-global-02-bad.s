#! type xdp
#! map g array key=4 value=16 entries=1
#! kernel reject "invalid access to map value pointer, value_size=16 off=16"
#! rule map-global
#! note offset at the end of the value
lddw %r1, map_idx_value(0, 16)
mov %r0, 0
exit
