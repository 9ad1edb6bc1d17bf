#! type xdp
#! kernel accept
#! rule helper-unknown
#! note a known helper
call 7
exit
