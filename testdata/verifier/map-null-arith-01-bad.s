#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel reject "pointer arithmetic on map_value_or_null prohibited"
#! rule map-null-arith
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
add %r0, 4
jeq %r0, 0, out
ldxw %r1, [%r0+0]
out:
mov %r0, 0
exit
