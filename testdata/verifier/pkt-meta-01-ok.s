#! type xdp
#! kernel accept
#! rule pkt-meta
#! note data_meta checked against data
ldxw %r2, [%r1+0]
ldxw %r4, [%r1+8]     # data_meta
mov %r5, %r4
add %r5, 4
jgt %r5, %r2, out
ldxw %r0, [%r4+0]
exit
out:
mov %r0, 0
exit
