#! type socket
#! kernel accept
#! rule call
#! note 256 + 256 = 512
stdw [%r10-256], 0
call local f
mov %r0, 0
exit
f:
stdw [%r10-256], 0
mov %r0, 0
exit
