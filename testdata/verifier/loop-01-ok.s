#! type socket
#! kernel accept
#! rule loop
#! note i < 10
mov %r0, 0
mov %r1, 0
loop:
add %r0, 3
add %r1, 1
jlt %r1, 10, loop
exit
