#! type socket
#! kernel accept
#! rule retval
#! note privileged: a pointer may be returned
mov %r0, %r10
exit
