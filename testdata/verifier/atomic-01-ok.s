#! type socket
#! kernel accept
#! rule atomic
#! note on the stack
stdw [%r10-8], 0
mov %r1, 1
lock add [%r10-8], %r1
ldxdw %r0, [%r10-8]
exit
