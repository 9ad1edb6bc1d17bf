#! type socket
#! kernel reject "last insn is not an exit or jmp"
#! rule jump
mov %r0, 0
