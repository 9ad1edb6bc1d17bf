#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-range
#! note a word crossing the checked end
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxw %r0, [%r2+11]
exit
out:
mov %r0, 0
exit
