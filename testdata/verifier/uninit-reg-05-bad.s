#! type socket
#! kernel reject "R2 !read_ok"
#! rule uninit-reg
#! note written on one path only
call 7
jeq %r0, 0, skip
mov %r2, 1
skip:
mov %r0, %r2
exit
