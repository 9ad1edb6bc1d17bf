#! type xdp
#! kernel reject "invalid access to packet"
#! rule pkt-cmp
#! note <= gives 14 bytes, not 15
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 14
jle %r4, %r3, good
mov %r0, 0
exit
good:
ldxb %r0, [%r2+14]
exit
