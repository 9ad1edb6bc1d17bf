#! type xdp
#! kernel accept
#! rule pkt-copy
#! note a spilled copy gets the range
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
stxdw [%r10-8], %r2
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxdw %r5, [%r10-8]
ldxb %r0, [%r5+13]
exit
out:
mov %r0, 0
exit
