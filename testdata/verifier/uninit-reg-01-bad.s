#! type socket
#! kernel reject "R2 !read_ok"
#! rule uninit-reg
#! note r2 is never written
mov %r0, %r2
exit
