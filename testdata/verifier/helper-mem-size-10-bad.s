#! type xdp
#! kernel reject "invalid read from stack R1 off=-8 size=12"
#! rule helper-mem-size
#! note reads past the frame
stdw [%r10-8], 0
mov %r1, %r10
add %r1, -8
mov %r2, 12
mov %r3, 0
mov %r4, 0
mov %r5, 0
call 28
mov %r0, 0
exit
