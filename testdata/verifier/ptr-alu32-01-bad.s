#! type socket
#! kernel reject "32-bit pointer arithmetic prohibited"
#! rule ptr-alu32
mov %r2, %r10
add32 %r2, -8
mov %r0, 0
exit
