#! type socket
#! kernel accept
#! rule uninit-reg
#! note written first
mov %r2, 1
mov %r0, %r2
exit
