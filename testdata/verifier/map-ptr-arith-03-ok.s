#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule map-ptr-arith
#! note copies of the map pointer
lddw %r1, map_idx(0)
mov %r6, %r1
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
mov %r1, %r6
mov %r0, 0
exit
