#! type socket
#! kernel reject "jump into the middle of ldimm64"
#! rule jump
mov %r0, 0
jeq %r0, 0, +1
lddw %r1, 5
exit
