#! type xdp
#! kernel reject "invalid func unknown#999"
#! rule helper-unknown
call 999
mov %r0, 0
exit
