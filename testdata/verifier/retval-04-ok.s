#! type xdp
#! kernel accept
#! rule retval
call 7
exit
