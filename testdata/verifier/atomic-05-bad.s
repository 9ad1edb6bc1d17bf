#! type xdp
#! kernel reject "BPF_ATOMIC stores into R2 pkt is not allowed"
#! rule atomic
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 8
jgt %r4, %r3, out
mov %r1, 1
lock add [%r2+0], %r1
out:
mov %r0, 0
exit
