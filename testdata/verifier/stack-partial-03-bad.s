#! type socket
#! kernel reject "invalid mem access 'scalar'"
#! rule stack-partial
#! note whole slot overwritten by a number
stxdw [%r10-8], %r1
stdw [%r10-8], 5
ldxdw %r6, [%r10-8]
ldxw %r0, [%r6+0]
exit
