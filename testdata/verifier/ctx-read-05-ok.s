#! type socket
#! kernel accept
#! rule ctx-read
#! note __sk_buff allows narrow loads
ldxb %r0, [%r1+0]     # len, low byte
exit
