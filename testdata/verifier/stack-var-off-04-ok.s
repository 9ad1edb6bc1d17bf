#! type socket
#! kernel accept
#! rule stack-var-off
#! note a variable-offset write
call 7
and %r0, 8
mov %r2, %r10
add %r2, -16
add %r2, %r0
stdw [%r2+0], 1
mov %r0, 0
exit
