#! type socket
#! kernel accept
#! rule ptr-alu-op
#! note privileged: neg turns a pointer into a scalar
mov %r2, %r10
neg %r2
mov %r0, 0
exit
