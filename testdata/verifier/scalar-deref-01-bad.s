#! type socket
#! kernel reject "invalid mem access 'scalar'"
#! rule scalar-deref
mov %r1, 0x1000
ldxw %r0, [%r1+0]
exit
