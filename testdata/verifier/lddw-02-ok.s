#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule lddw
lddw %r1, map_idx(0)
mov %r0, 0
exit
