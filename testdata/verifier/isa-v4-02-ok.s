#! type socket
#! kernel accept
#! rule isa-v4
mov %r0, -7
smod32 %r0, 3
exit
