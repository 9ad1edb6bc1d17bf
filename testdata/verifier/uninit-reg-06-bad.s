#! type socket
#! kernel reject "R3 !read_ok"
#! rule uninit-reg
#! note an ALU op reads its destination
add %r3, 1
mov %r0, 0
exit
