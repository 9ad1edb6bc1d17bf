#! type xdp
#! kernel accept
#! rule pkt-var-off
#! note offset bounded by a comparison
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
jgt %r5, 60, out
add %r2, %r5
mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
ldxw %r0, [%r2+0]
exit
out:
mov %r0, 0
exit
