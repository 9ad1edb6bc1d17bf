#! type socket
#! kernel accept
#! rule loop
#! note counting down
mov %r0, 0
mov %r1, 10
loop:
add %r0, 1
sub %r1, 1
jne %r1, 0, loop
exit
