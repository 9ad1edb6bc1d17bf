#! type socket
#! kernel accept
#! rule lddw
lddw %r0, -1
exit
