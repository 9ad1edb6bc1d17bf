#! type sched_cls
#! kernel accept
#! rule pkt-range
#! note tc, the same check
ldxw %r2, [%r1+76]    # data
ldxw %r3, [%r1+80]    # data_end
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
ldxh %r0, [%r2+12]
exit
out:
mov %r0, 0
exit
