# Sum of every byte of a 1500-byte packet (r1 = packet). A loop over packet bytes.
mov %r0, 0
mov %r3, 0
loop:
mov %r4, %r1
add %r4, %r3
ldxb %r5, [%r4]
add %r0, %r5
add %r3, 1
jlt %r3, 1500, loop
exit
