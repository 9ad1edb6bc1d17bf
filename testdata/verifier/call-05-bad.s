#! type socket
#! kernel reject "combined stack size"
#! rule call
stdw [%r10-320], 0
call local f
mov %r0, 0
exit
f:
stdw [%r10-256], 0
mov %r0, 0
exit
