#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-cmp
#! note equality gives no range
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 14
jne %r4, %r3, out
ldxb %r0, [%r2+0]
exit
out:
mov %r0, 0
exit
