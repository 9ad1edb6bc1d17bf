#! type socket
#! kernel reject "BPF program is too large. Processed 1000001 insn"
#! rule loop
#! note counting the wrong way: 2^64 iterations
mov %r0, 0
mov %r1, 10
loop:
add %r0, 1
add %r1, 1
jne %r1, 0, loop
exit
