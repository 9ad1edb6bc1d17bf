#! type socket
#! kernel reject "cannot return stack pointer to the caller"
#! rule call
#! note returning a pointer to the callee's stack
call local f
ldxdw %r0, [%r0+0]
exit
f:
stdw [%r10-8], 1
mov %r0, %r10
add %r0, -8
exit
