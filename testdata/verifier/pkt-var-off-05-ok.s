#! type sched_cls
#! kernel accept
#! rule pkt-var-off
#! note tc, masked offset
ldxw %r2, [%r1+76]    # data
ldxw %r3, [%r1+80]    # data_end
mov %r4, %r2
add %r4, 1
jgt %r4, %r3, out
ldxb %r5, [%r2+0]
and %r5, 60
add %r2, %r5
mov %r4, %r2
add %r4, 2
jgt %r4, %r3, out
ldxh %r0, [%r2+0]
exit
out:
mov %r0, 0
exit
