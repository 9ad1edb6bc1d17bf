#! type xdp
#! map m array key=4 value=8 entries=4
#! kernel reject "map_value_or_null"
#! rule map-array
#! note key 4 of 4 entries may be null
stw [%r10-4], 4
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1
ldxdw %r1, [%r0+0]
mov %r0, 0
exit
