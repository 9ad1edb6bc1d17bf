#! type xdp
#! kernel accept
#! rule stack-spill
#! note a checked packet pointer keeps its range through the stack
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 8
jgt %r4, %r3, out
stxdw [%r10-16], %r2
ldxdw %r5, [%r10-16]
ldxdw %r0, [%r5+0]
exit
out:
mov %r0, 0
exit
