#! type socket
#! kernel reject "jump out of range"
#! rule jump
#! note a conditional jump past the end
mov %r0, 0
jeq %r0, 0, +2
exit
