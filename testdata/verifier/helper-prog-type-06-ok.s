#! type socket
#! kernel accept
#! rule helper-prog-type
#! note a socket filter may read it
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 8
call 26
mov %r0, 0
exit
