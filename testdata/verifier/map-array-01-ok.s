#! type xdp
#! map m array key=4 value=8 entries=4
#! kernel accept
#! rule map-array
#! note constant in-range key of an array: not null
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
ldxdw %r1, [%r0+0]
mov %r0, 0
exit
