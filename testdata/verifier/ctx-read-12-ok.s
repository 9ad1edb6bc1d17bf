#! type socket
#! kernel accept
#! rule ctx-read
ldxh %r0, [%r1+18]    # protocol, high half
exit
