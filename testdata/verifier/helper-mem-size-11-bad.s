#! type sched_cls
#! kernel reject "unbounded memory access"
#! rule helper-mem-size
#! note size 1..2^32-1
mov %r6, %r1
call 7
mov32 %r4, %r0
or %r4, 1
mov %r1, %r6
mov %r2, 0
mov %r3, %r10
add %r3, -8
call 26
mov %r0, 0
exit
