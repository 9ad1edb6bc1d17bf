#! type xdp
#! kernel accept
#! rule ctx-read
ldxw %r0, [%r1+12]    # ingress_ifindex
exit
