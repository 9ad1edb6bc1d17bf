#! type socket
#! kernel accept
#! rule fp-write
#! note a copy of r10 may move
mov %r1, %r10
add %r1, -8
stdw [%r1+0], 0
mov %r0, 0
exit
