#! type socket
#! kernel accept
#! rule call
mov %r1, 41
call local f
exit
f:
mov %r0, %r1
add %r0, 1
exit
