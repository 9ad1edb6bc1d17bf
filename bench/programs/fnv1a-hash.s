# 64-bit FNV-1a hash of a 1500-byte packet.
lddw %r0, 0xcbf29ce484222325
lddw %r6, 0x100000001b3
mov %r3, 0
loop:
mov %r4, %r1
add %r4, %r3
ldxb %r5, [%r4]
xor %r0, %r5
mul %r0, %r6
add %r3, 1
jlt %r3, 1500, loop
exit
