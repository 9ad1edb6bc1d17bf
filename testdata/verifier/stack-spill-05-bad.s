#! type socket
#! kernel reject "invalid size of register fill"
#! rule stack-spill
#! note a narrow fill of a spilled pointer
stxdw [%r10-8], %r1
ldxw %r0, [%r10-8]
exit
