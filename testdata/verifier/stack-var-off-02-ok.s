#! type socket
#! kernel accept
#! rule stack-var-off
#! note privileged: one candidate slot uninitialized is still readable
stdw [%r10-8], 0
call 7
and %r0, 8
mov %r2, %r10
add %r2, -16
add %r2, %r0
ldxdw %r0, [%r2+0]
exit
