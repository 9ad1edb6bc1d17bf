#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "only read from bpf_htab is supported"
#! rule map-ptr-arith
lddw %r1, map_idx(0)
stdw [%r1+0], 0
mov %r0, 0
exit
