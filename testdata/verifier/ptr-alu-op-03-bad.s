#! type socket
#! kernel reject "R2 pointer arithmetic with <<= operator prohibited"
#! rule ptr-alu-op
mov %r2, %r10
lsh %r2, 1
mov %r0, 0
exit
