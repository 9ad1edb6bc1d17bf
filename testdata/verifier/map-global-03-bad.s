#! type xdp
#! map g array key=4 value=16 entries=1
#! kernel reject "invalid access to map value"
#! rule map-global
#! note 8 + 8 past a 16-byte value
lddw %r1, map_idx_value(0, 8)
ldxdw %r0, [%r1+8]
exit
