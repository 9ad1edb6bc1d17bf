#! type socket
#! kernel accept
#! rule div-zero
mov %r0, -10
mov %r2, 0
smod32 %r0, %r2
exit
