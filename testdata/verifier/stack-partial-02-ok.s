#! type socket
#! kernel accept
#! rule stack-partial
#! note the damaged slot read as a number
stxdw [%r10-8], %r1
stb [%r10-8], 0
ldxdw %r0, [%r10-8]
exit
