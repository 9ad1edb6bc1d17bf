#! type socket
#! kernel reject "invalid variable-offset read from stack"
#! rule stack-bounds
#! note a shift that may drop set bits keeps only the known bits (the kernel's lsh): r2 in
#! note [0, 5] comes back from `add 2^17; lsh 47; rsh 47` as [0, 7], past the frame
call 7
jgt %r0, 5, out
mov %r2, %r0
add %r2, 0x20000
lsh %r2, 47
rsh %r2, 47
mov %r3, %r10
add %r3, -6
add %r3, %r2
ldxb %r0, [%r3+0]
exit
out:
mov %r0, 0
exit
