#! type socket
#! kernel reject "R6 !read_ok"
#! rule call
#! note the callee cannot see the caller's r6
mov %r6, 1
call local f
exit
f:
mov %r0, %r6
exit
