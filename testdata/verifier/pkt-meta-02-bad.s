#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-meta
#! note data_meta without a check
ldxw %r4, [%r1+8]
ldxw %r0, [%r4+0]
exit
