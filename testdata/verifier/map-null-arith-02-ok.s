#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule map-null-arith
#! note arithmetic after the null check
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
jeq %r0, 0, out
add %r0, 4
ldxw %r1, [%r0+0]
out:
mov %r0, 0
exit
