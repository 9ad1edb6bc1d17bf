#! type socket
#! kernel reject "the call stack of 9 frames is too deep"
#! rule call
#! note recursion: refused at the depth limit
mov %r1, 3
call local f
exit
f:
call local f
exit
