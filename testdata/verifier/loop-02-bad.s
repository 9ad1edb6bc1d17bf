#! type socket
#! kernel reject "infinite loop detected"
#! rule loop
mov %r0, 0
loop:
ja loop
