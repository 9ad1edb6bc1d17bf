#! type sched_cls
#! kernel accept
#! rule pkt-write
#! note tc may write the packet
ldxw %r2, [%r1+76]    # data
ldxw %r3, [%r1+80]    # data_end
mov %r4, %r2
add %r4, 14
jgt %r4, %r3, out
stb [%r2+0], 0xff
out:
mov %r0, 0
exit
