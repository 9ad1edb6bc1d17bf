#! type xdp
#! kernel accept
#! rule ctx-read
ldxw %r0, [%r1+16]    # rx_queue_index
exit
