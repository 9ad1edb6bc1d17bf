#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-copy
#! note a copy moved by 1 before the check
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r6, %r2
add %r6, 1
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r0, [%r6+13]
exit
out:
mov %r0, 0
exit
