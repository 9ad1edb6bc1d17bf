#! type sched_act
#! kernel accept
#! rule pkt-range
#! note tc action
ldxw %r2, [%r1+76]    # data
ldxw %r3, [%r1+80]    # data_end
mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
ldxw %r0, [%r2+0]
exit
out:
mov %r0, 0
exit
