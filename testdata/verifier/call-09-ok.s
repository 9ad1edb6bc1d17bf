#! type socket
#! kernel accept
#! rule call
#! note the callee reads the caller's stack
stdw [%r10-8], 9
mov %r1, %r10
add %r1, -8
call local f
exit
f:
ldxdw %r0, [%r1+0]
exit
