#! type socket
#! kernel accept
#! rule call
#! note five arguments
mov %r1, 1
mov %r2, 2
mov %r3, 3
mov %r4, 4
mov %r5, 5
call local f
exit
f:
mov %r0, %r1
add %r0, %r5
exit
