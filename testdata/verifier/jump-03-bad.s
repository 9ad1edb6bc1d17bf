#! type socket
#! kernel reject "unreachable insn"
#! rule jump
mov %r0, 0
exit
mov %r0, 1
exit
