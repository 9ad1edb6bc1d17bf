#! type socket
#! kernel reject "invalid write to stack"
#! rule stack-bounds
stdw [%r10-520], 0
mov %r0, 0
exit
