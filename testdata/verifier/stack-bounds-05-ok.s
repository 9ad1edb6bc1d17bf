#! type socket
#! kernel accept
#! rule stack-bounds
#! note the highest byte
stb [%r10-1], 1
ldxb %r0, [%r10-1]
exit
