#! type socket
#! kernel accept
#! rule atomic
#! note privileged: atomic add on uninitialized stack
mov %r1, 1
lock add [%r10-8], %r1
mov %r0, 0
exit
