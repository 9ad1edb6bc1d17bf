#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "pointer arithmetic on map_ptr prohibited"
#! rule map-ptr-arith
lddw %r1, map_idx(0)
add %r1, 8
mov %r0, 0
exit
