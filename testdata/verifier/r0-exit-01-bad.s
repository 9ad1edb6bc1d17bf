#! type socket
#! kernel reject "R0 !read_ok"
#! rule r0-exit
exit
