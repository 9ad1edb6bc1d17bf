#! type sched_cls
#! kernel reject "invalid access to packet"
#! rule pkt-write
#! note write one past
ldxw %r2, [%r1+76]    # data
ldxw %r3, [%r1+80]    # data_end
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
stb [%r2+14], 0
out:
mov %r0, 0
exit
