#! type sched_cls
#! kernel reject "R4 invalid zero-sized read: u64=[0,15]"
#! rule helper-mem-size
#! note size 0..15: may be zero and too large
mov %r6, %r1
call 7
and %r0, 15
mov %r4, %r0
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
call 26
mov %r0, 0
exit
