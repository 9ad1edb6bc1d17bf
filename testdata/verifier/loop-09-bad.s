#! type socket
#! kernel reject "BPF program is too large. Processed 1000001 insn"
#! rule loop
#! note bounded, but past the instruction budget
mov %r0, 0
mov %r1, 0
loop:
add %r1, 1
jlt %r1, 1000000, loop
exit
