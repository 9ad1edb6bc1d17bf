#! type socket
#! kernel accept
#! rule r0-exit
mov32 %r0, 0
exit
