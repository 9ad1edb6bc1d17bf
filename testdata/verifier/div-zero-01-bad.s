#! type socket
#! kernel reject "div by zero"
#! rule div-zero
mov %r0, 10
div %r0, 0
exit
