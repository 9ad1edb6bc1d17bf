#! type socket
#! kernel accept
#! rule lddw
lddw %r0, 0x1122334455667788
exit
