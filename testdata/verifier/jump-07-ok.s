#! type socket
#! kernel accept
#! rule jump
#! note gotol (RFC 9669 v4)
call 7
jeq %r0, 0, +1
ja32 +1
mov %r0, 1
exit
