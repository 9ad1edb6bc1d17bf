#! type sched_cls
#! kernel reject "min value is negative"
#! rule helper-mem-size
#! note size unknown: may be negative
mov %r6, %r1
call 7
mov %r4, %r0
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
call 26
mov %r0, 0
exit
