#! type socket
#! kernel reject "invalid read from stack R1 off=0 size=8"
#! rule call
#! note past the caller's frame
stdw [%r10-8], 9
mov %r1, %r10
add %r1, -8
call local f
exit
f:
ldxdw %r0, [%r1+8]
exit
