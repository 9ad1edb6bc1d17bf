#! type socket
#! kernel reject "infinite loop detected"
#! rule loop
#! note the same state again
mov %r0, 0
loop:
mov %r1, 0
jeq %r1, 0, loop
exit
