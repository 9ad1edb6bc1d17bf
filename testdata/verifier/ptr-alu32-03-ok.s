#! type socket
#! kernel accept
#! rule ptr-alu32
#! note privileged: returning the pointer's low half is allowed
mov32 %r0, %r10
exit
