#! type socket
#! kernel reject "invalid mem access 'scalar'"
#! rule scalar-deref
#! note a store through a scalar
mov %r2, 0
stw [%r2+0], 1
mov %r0, 0
exit
