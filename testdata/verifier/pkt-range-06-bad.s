#! type sched_cls
#! kernel reject "invalid access to packet"
#! rule pkt-range
#! note tc without a check
ldxw %r2, [%r1+76]    # data
ldxw %r3, [%r1+80]    # data_end
ldxh %r0, [%r2+12]
exit
