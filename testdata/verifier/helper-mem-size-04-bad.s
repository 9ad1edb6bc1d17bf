#! type sched_cls
#! kernel reject "R4 invalid zero-sized read: u64=[0,0]"
#! rule helper-mem-size
#! note size zero
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 0
call 26
mov %r0, 0
exit
