# RFC 1071 Internet checksum of a 1500-byte packet: 16-bit big-endian words, folded.
# Folded twice, not in a loop, as the kernel's csum_fold does: 750 words sum to less
# than 2^26, so two folds leave 16 bits; and a fold loop on the sum is a loop whose
# state never settles for a verifier (it is refused as too complex, by the kernel too).
mov %r0, 0
mov %r3, 0
loop:
mov %r4, %r1
add %r4, %r3
ldxh %r5, [%r4]
be16 %r5
add %r0, %r5
add %r3, 2
jlt %r3, 1500, loop
mov %r2, %r0
rsh %r2, 16
and %r0, 0xffff
add %r0, %r2
mov %r2, %r0
rsh %r2, 16
and %r0, 0xffff
add %r0, %r2
xor %r0, 0xffff
exit
