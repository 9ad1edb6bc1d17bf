#! type socket
#! kernel accept
#! rule stack-uninit
stdw [%r10-8], 3
ldxdw %r0, [%r10-8]
exit
