#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "R2 type=scalar expected="
#! rule map-key
lddw %r1, map_idx(0)
mov %r2, 0
call 1
mov %r0, 0
exit
