#! type socket
#! kernel reject "R2 !read_ok"
#! rule ld-abs
#! note ld_abs clobbers r1-r5
mov %r6, %r1
mov %r2, 5
ldabsw 0
mov %r0, %r2
exit
