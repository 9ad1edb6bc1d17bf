#! type socket
#! kernel reject "invalid mem access 'scalar'"
#! rule ptr-alu32
#! note mov32 of a pointer gives a scalar
mov32 %r2, %r10
stdw [%r2-8], 0
mov %r0, 0
exit
