# Copies the first 256 bytes of the packet to the stack 8 bytes at a time, six times over,
# then sums the copy: memory traffic through loads and stores. The buffer's address is
# r10 + -256, not r10 - 256: the kernel's verifier refuses subtraction from the frame
# pointer (so does weir's).
mov %r0, 0
mov %r7, 0
round:
mov %r3, 0
copy:
mov %r4, %r1
add %r4, %r3
ldxdw %r5, [%r4]
mov %r6, %r10
add %r6, -256
add %r6, %r3
stxdw [%r6], %r5
add %r3, 8
jlt %r3, 256, copy
add %r7, 1
jlt %r7, 6, round
mov %r3, 0
sum:
mov %r6, %r10
add %r6, -256
add %r6, %r3
ldxdw %r5, [%r6]
add %r0, %r5
add %r3, 8
jlt %r3, 256, sum
exit
