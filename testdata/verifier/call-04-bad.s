#! type socket
#! kernel reject "R0 !read_ok"
#! rule call
#! note the callee returns nothing
call local f
exit
f:
exit
