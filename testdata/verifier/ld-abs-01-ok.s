#! type socket
#! kernel accept
#! rule ld-abs
mov %r6, %r1
ldabsh 12
exit
