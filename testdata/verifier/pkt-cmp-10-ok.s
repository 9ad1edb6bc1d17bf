#! type xdp
#! kernel accept
#! rule pkt-cmp
#! note reversed: data_end >= data + 14
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 14
jge %r3, %r4, good
mov %r0, 0
exit
good:
ldxb %r0, [%r2+13]
exit
