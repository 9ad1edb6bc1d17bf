#! type socket
#! kernel reject "invalid variable-offset read from stack R2 var_off=(0x0; 0x10) off=-8 size=8"
#! rule stack-var-off
#! note offset up to +8 reaches above the frame
stdw [%r10-8], 0
call 7
and %r0, 16
mov %r2, %r10
add %r2, -8
add %r2, %r0
ldxdw %r0, [%r2+0]
exit
