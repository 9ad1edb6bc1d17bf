#! type socket
#! kernel reject "R7 !read_ok"
#! rule ld-abs
mov %r6, %r1
ldindw %r7, 0
exit
