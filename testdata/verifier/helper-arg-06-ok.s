#! type xdp
#! map dev devmap key=4 value=4 entries=4
#! kernel accept
#! rule helper-arg
lddw %r1, map_idx(0)
mov %r2, 0
mov %r3, 0
call 51               # bpf_redirect_map
exit
