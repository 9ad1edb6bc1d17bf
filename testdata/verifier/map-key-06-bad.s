#! type xdp
#! map m hash key=8 value=8 entries=16
#! kernel reject "invalid read from stack R2 off=-4 size=8"
#! rule map-key
#! note the key runs past the frame
stdw [%r10-8], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 0
exit
