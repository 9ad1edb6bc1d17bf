#! type sched_cls
#! kernel reject "bpf_xdp_adjust_head"
#! rule helper-prog-type
mov %r2, 0
call 44               # bpf_xdp_adjust_head
mov %r0, 0
exit
