#! type socket
#! kernel accept
#! rule stack-uninit
#! note the written half
stw [%r10-8], 3
ldxw %r0, [%r10-8]
exit
