#! type sched_cls
#! kernel reject "min value is negative"
#! rule helper-mem-size
#! note size negative
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, -1
call 26
mov %r0, 0
exit
