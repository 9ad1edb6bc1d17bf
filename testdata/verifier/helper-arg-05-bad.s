#! type xdp
#! kernel reject "R1 type=scalar expected=map_ptr"
#! rule helper-arg
call 7
mov %r1, %r0
mov %r2, 0
call 51               # bpf_redirect_map
exit
