#! type socket
#! kernel reject "at the time of BPF_LD_ABS|IND R6 != pointer to skb"
#! rule ld-abs
mov %r6, 0
ldabsb 0
exit
