#! type socket
#! kernel accept
#! rule atomic
#! note xchg on the stack
stdw [%r10-8], 0
mov %r1, 1
lock xchg [%r10-8], %r1
mov %r0, %r1
exit
