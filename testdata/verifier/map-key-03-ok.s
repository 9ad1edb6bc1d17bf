#! type xdp
#! map m hash key=8 value=8 entries=16
#! kernel accept
#! rule map-key
stdw [%r10-8], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -8
call 1
mov %r0, 0
exit
