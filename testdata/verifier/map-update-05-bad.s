#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "R3 type=map_ptr"
#! rule map-update
#! note the map as the value
stw [%r10-4], 1
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
mov %r3, %r1
mov %r4, 0
call 2
mov %r0, 0
exit
