#! type socket
#! kernel reject "div by zero"
#! rule isa-v4
mov %r0, 5
sdiv32 %r0, 0
exit
