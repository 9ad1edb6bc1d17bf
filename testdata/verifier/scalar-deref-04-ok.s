#! type xdp
#! kernel accept
#! rule scalar-deref
#! note a copy of the context pointer
mov %r2, %r1
ldxw %r0, [%r2+12]
exit
