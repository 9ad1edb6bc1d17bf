#! type socket
#! kernel accept
#! rule uninit-reg
#! note r6-r9 survive a helper call
mov %r6, 1
call 7
mov %r0, %r6
exit
