#! type socket
#! kernel reject "div by zero"
#! rule div-zero
#! note signed
mov %r0, 10
sdiv %r0, 0
exit
