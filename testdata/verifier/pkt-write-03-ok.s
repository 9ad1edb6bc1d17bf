#! type xdp
#! kernel accept
#! rule pkt-write
#! note xdp may write the packet
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
mov %r5, 1
stxh [%r2+12], %r5
out:
mov %r0, 0
exit
