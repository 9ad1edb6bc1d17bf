#! type socket
#! kernel accept
#! rule stack-spill
#! note spilled twice
stxdw [%r10-8], %r1
ldxdw %r6, [%r10-8]
stxdw [%r10-16], %r6
ldxdw %r7, [%r10-16]
ldxw %r0, [%r7+4]
exit
