#! type socket
#! kernel accept
#! rule isa-v4
mov %r0, -7
sdiv %r0, 3
exit
