#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-write
#! note write without a check
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
stb [%r2+0], 0
mov %r0, 0
exit
