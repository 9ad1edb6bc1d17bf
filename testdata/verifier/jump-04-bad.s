#! type socket
#! kernel reject "jump out of range"
#! rule jump
ja -5
mov %r0, 0
exit
