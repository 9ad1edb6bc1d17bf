#! type socket
#! kernel accept
#! rule stack-uninit
#! note privileged: half of the slot written is readable
stw [%r10-8], 3
ldxdw %r0, [%r10-8]
exit
