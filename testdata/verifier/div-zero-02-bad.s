#! type socket
#! kernel reject "div by zero"
#! rule div-zero
mov %r0, 10
mod32 %r0, 0
exit
