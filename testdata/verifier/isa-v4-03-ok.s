#! type socket
#! kernel accept
#! rule isa-v4
mov %r1, 0xff
movsx864 %r0, %r1
exit
