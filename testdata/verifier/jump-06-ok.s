#! type socket
#! kernel accept
#! rule jump
#! note a diamond
call 7
jeq %r0, 0, a
mov %r0, 1
ja b
a:
mov %r0, 2
b:
exit
