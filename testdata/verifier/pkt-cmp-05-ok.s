#! type xdp
#! kernel accept
#! rule pkt-cmp
#! note data + 14 <= data_end
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 14
jle %r4, %r3, good
mov %r0, 0
exit
good:
ldxb %r0, [%r2+13]
exit
