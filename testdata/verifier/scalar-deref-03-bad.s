#! type xdp
#! kernel reject "invalid mem access 'scalar'"
#! rule scalar-deref
#! note a context field that is a number
ldxw %r2, [%r1+12]   # ingress_ifindex
ldxw %r0, [%r2+0]
exit
