#! type socket
#! kernel accept
#! rule ptr-add-ptr
#! note scalar += pointer gives a pointer
mov %r2, -8
add %r2, %r10
stdw [%r2+0], 0
mov %r0, 0
exit
