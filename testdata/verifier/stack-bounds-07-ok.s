#! type socket
#! kernel accept
#! rule stack-bounds
#! note the same walk on [0, 5] without the wrap: a shift that keeps every bit keeps the
#! note bounds
call 7
jgt %r0, 5, out
mov %r2, %r0
lsh %r2, 4
rsh %r2, 4
mov %r3, %r10
add %r3, -6
add %r3, %r2
ldxb %r0, [%r3+0]
exit
out:
mov %r0, 0
exit
