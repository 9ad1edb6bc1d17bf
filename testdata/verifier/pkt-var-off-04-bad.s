#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-var-off
#! note checked before adding the variable part
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 20
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
and %r5, 15
add %r2, %r5
ldxw %r0, [%r2+0]
exit
out:
mov %r0, 0
exit
