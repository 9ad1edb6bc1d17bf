#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-range
#! note no data_end check
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
ldxb %r0, [%r2+0]
exit
