#! type socket
#! kernel accept
#! rule ptr-add-ptr
#! note stack - ctx: privileged, a scalar
mov %r0, %r10
sub %r0, %r1
exit
