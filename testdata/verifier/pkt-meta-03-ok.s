#! type sched_cls
#! kernel accept
#! rule pkt-meta
#! note tc data_meta
ldxw %r2, [%r1+76]
ldxw %r4, [%r1+140]   # data_meta
mov %r5, %r4
add %r5, 4
jgt %r5, %r2, out
ldxw %r0, [%r4+0]
exit
out:
mov %r0, 0
exit
