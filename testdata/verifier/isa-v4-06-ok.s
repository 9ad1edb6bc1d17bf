#! type socket
#! kernel accept
#! rule isa-v4
mov %r1, -1
movsx3264 %r0, %r1
exit
