#! type socket
#! kernel reject "invalid size of register spill"
#! rule stack-spill
#! note a pointer spilled in 4 bytes
stxw [%r10-8], %r1
mov %r0, 0
exit
