#! type socket
#! kernel reject "invalid read from stack"
#! rule stack-bounds
stdw [%r10-512], 0
ldxdw %r0, [%r10-520]
exit
