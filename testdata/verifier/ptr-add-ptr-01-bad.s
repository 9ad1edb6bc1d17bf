#! type socket
#! kernel reject "pointer += pointer prohibited"
#! rule ptr-add-ptr
mov %r2, %r10
add %r2, %r1
mov %r0, 0
exit
