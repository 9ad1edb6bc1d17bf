#! type socket
#! kernel accept
#! rule stack-align
#! note aligned narrow accesses
stw [%r10-12], 0
ldxh %r0, [%r10-10]
exit
