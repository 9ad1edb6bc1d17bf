#! type sched_cls
#! map m hash key=4 value=8 entries=16
#! kernel reject "expected prog array map for tail call"
#! rule helper-arg
#! note tail call through a hash map
lddw %r2, map_idx(0)
mov %r3, 0
call 12               # bpf_tail_call
mov %r0, 0
exit
