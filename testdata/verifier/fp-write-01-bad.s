#! type socket
#! kernel reject "frame pointer is read only"
#! rule fp-write
mov %r10, 0
mov %r0, 0
exit
