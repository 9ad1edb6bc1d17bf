#! type socket
#! kernel reject "misaligned stack access"
#! rule stack-align
stdw [%r10-8], 0
ldxw %r0, [%r10-6]
exit
