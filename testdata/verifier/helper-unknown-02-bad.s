#! type xdp
#! kernel reject "cannot use helper bpf_unspec#0"
#! rule helper-unknown
#! note helper 0
call 0
mov %r0, 0
exit
