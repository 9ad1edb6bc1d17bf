#! type socket
#! kernel reject "invalid mem access"
#! rule stack-partial
#! note one byte of the spilled pointer overwritten
stxdw [%r10-8], %r1
stb [%r10-8], 0
ldxdw %r6, [%r10-8]
ldxw %r0, [%r6+0]
exit
