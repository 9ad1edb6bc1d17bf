#! type socket
#! kernel accept
#! rule isa-v4
#! note sign-extending load
stb [%r10-1], -1
ldxbsx %r0, [%r10-1]
exit
