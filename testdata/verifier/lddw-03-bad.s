#! type xdp
#! kernel reject "fd 999999 is not pointing to valid bpf_map"
#! rule lddw
#! note no such descriptor
lddw %r1, map_fd(999999)
mov %r0, 0
exit
