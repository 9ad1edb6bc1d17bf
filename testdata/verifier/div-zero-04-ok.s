#! type socket
#! kernel accept
#! rule div-zero
#! note by an unknown register
mov %r0, 10
call 7
mov %r2, %r0
mov %r0, 10
mod %r0, %r2
exit
