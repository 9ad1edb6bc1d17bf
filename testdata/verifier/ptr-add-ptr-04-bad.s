#! type socket
#! kernel reject "tried to subtract pointer from scalar"
#! rule ptr-add-ptr
mov %r2, 8
sub %r2, %r10
mov %r0, 0
exit
