#! type socket
#! kernel reject "pointer arithmetic with *= operator prohibited"
#! rule ptr-alu-op
mov %r2, %r10
mul %r2, 2
mov %r0, 0
exit
