#! type xdp
#! kernel accept
#! rule r0-exit
#! note a helper's return value is a value
call 7
exit
