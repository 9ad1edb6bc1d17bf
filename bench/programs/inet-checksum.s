# RFC 1071 Internet checksum of a 1500-byte packet: 16-bit big-endian words, folded.
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
fold:
mov %r2, %r0
rsh %r2, 16
and %r0, 0xffff
add %r0, %r2
mov %r2, %r0
rsh %r2, 16
jne %r2, 0, fold
xor %r0, 0xffff
exit
