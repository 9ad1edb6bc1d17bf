#! type socket
#! kernel reject "R2 !read_ok"
#! rule atomic
stdw [%r10-8], 0
lock add [%r10-8], %r2
mov %r0, 0
exit
