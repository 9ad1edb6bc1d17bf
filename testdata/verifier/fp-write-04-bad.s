#! type socket
#! kernel reject "frame pointer is read only"
#! rule fp-write
#! note a load into r10
ldxw %r10, [%r1+0]
mov %r0, 0
exit
