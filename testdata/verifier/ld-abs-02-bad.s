#! type xdp
#! kernel reject "BPF_LD_[ABS|IND]"
#! rule ld-abs
mov %r6, %r1
ldabsh 12
exit
