#! type socket
#! kernel reject "frame pointer is read only"
#! rule fp-write
add %r10, -8
mov %r0, 0
exit
