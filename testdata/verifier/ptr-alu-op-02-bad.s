#! type socket
#! kernel reject "R2 bitwise operator &= on pointer prohibited"
#! rule ptr-alu-op
#! note bitwise and on a pointer
mov %r2, %r10
and %r2, -8
mov %r0, 0
exit
