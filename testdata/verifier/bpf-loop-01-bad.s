#! type xdp
#! kernel reject "missing btf func_info"
#! rule bpf-loop
#! note a callback needs BTF func_info, which a raw load does not give
mov %r1, 4
lddw %r2, func(cb)
mov %r3, 0
mov %r4, 0
call 181              # bpf_loop
mov %r0, 2
exit
cb:
mov %r0, 0
exit
