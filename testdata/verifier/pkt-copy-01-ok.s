#! type xdp
#! kernel accept
#! rule pkt-copy
#! note a copy taken before the check gets the range
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r6, %r2
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxb %r0, [%r6+13]
exit
out:
mov %r0, 0
exit
