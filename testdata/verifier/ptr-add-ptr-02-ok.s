#! type xdp
#! kernel accept
#! rule ptr-add-ptr
#! note data_end - data is a scalar
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r0, %r3
sub %r0, %r2
exit
