#! type socket
#! kernel reject "BPF program is too large. Processed 1000001 insn"
#! rule loop
#! note exits when a random number is 0: no bound
mov %r6, 0
loop:
call 7
add %r6, 1
jne %r0, 0, loop
mov %r0, %r6
exit
