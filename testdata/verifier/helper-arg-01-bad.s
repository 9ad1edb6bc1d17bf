#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "R1 type=scalar expected=map_ptr"
#! rule helper-arg
mov %r1, 0
mov %r2, %r10
add %r2, -4
stw [%r10-4], 0
call 1
mov %r0, 0
exit
