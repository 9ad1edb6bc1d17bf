#! type xdp
#! map m percpu_array key=4 value=8 entries=4
#! kernel accept
#! rule map-array
#! note per-CPU array counter
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
jeq %r0, 0, out
ldxdw %r1, [%r0+0]
add %r1, 1
stxdw [%r0+0], %r1
out:
mov %r0, 0
exit
