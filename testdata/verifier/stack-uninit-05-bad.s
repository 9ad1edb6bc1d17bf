#! type socket
#! kernel reject "invalid read from stack"
#! rule stack-uninit
#! note below the frame
ldxdw %r0, [%r10-520]
exit
