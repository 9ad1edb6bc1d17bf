#! type socket
#! kernel accept
#! rule stack-spill
#! note ctx pointer spilled and filled
stxdw [%r10-8], %r1
ldxdw %r6, [%r10-8]
ldxw %r0, [%r6+0]
exit
