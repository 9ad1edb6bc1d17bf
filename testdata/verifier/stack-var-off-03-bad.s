#! type socket
#! kernel reject "math between fp pointer and register with unbounded min value is not allowed"
#! rule stack-var-off
#! note unbounded variable offset
call 7
mov %r2, %r10
add %r2, -16
add %r2, %r0
stdw [%r2+0], 0
mov %r0, 0
exit
