#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "bpf_redirect_map"
#! rule helper-arg
#! note redirect_map on a hash map
lddw %r1, map_idx(0)
mov %r2, 0
mov %r3, 0
call 51
exit
