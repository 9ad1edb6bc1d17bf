#! type socket
#! kernel accept
#! rule div-zero
#! note by a register: defined as 0
mov %r0, 10
mov %r2, 0
div %r0, %r2
exit
