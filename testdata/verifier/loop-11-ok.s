#! type xdp
#! kernel accept
#! rule loop
#! note `weir compile --ebpf --target xdp 'ip6 protochain 17'`: the extension-header walk, its hop
#! note count in a 4-byte word at fp-512 (a narrow spill) and its offset widened by
#! note `add 2^17; lsh 47; rsh 47` (the kernel then knows only its tnum, and prunes); the
#! note kernel processes ~48,600 insns in 2-8 s here
ldxw %r8, [%r1+0]
ldxw %r9, [%r1+4]
mov %r1, %r8
add %r1, 21
jgt %r1, %r9, +54
ldxh %r0, [%r8+12]
be16 %r0
jne32 %r0, 34525, +51
ldxb %r0, [%r8+20]
mov32 %r2, 40
stw [%r10-512], 0
jeq32 %r0, 17, +45
jeq32 %r0, 59, +46
jeq32 %r0, 0, +5
jeq32 %r0, 60, +4
jeq32 %r0, 43, +3
jeq32 %r0, 44, +2
jeq32 %r0, 51, +20
ja +40
ldxw %r3, [%r10-512]
jge32 %r3, 64, +38
add32 %r3, 1
stxw [%r10-512], %r3
jgt %r2, 65519, +35
mov %r1, %r8
add %r1, %r2
mov %r3, %r1
add %r3, 16
jgt %r3, %r9, +30
ldxb %r0, [%r1+14]
ldxb %r3, [%r1+15]
add32 %r3, 1
lsh32 %r3, 3
add32 %r2, %r3
add %r2, 0x20000
lsh %r2, 47
rsh %r2, 47
ja -27
ldxw %r3, [%r10-512]
jge32 %r3, 64, +19
add32 %r3, 1
stxw [%r10-512], %r3
jgt %r2, 65519, +16
mov %r1, %r8
add %r1, %r2
mov %r3, %r1
add %r3, 16
jgt %r3, %r9, +11
ldxb %r0, [%r1+14]
ldxb %r3, [%r1+15]
add32 %r3, 2
lsh32 %r3, 2
mov32 %r2, %r3
add %r2, 0x20000
lsh %r2, 47
rsh %r2, 47
ja -46
mov32 %r0, 2
exit
mov32 %r0, 1
exit
