#! type socket
#! kernel accept
#! rule ctx-write
mov %r2, 7
stxw [%r1+48], %r2  # cb[0]
mov %r0, 0
exit
