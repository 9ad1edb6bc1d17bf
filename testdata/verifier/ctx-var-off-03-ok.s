#! type socket
#! kernel accept
#! rule ctx-var-off
mov %r2, %r1
ldxw %r0, [%r2+4]
exit
