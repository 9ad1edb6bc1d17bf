#! type socket
#! kernel accept
#! rule stack-uninit
#! note privileged (allow_uninit_stack): uninitialized stack reads are allowed
ldxdw %r0, [%r10-8]
exit
