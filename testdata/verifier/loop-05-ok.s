#! type xdp
#! map m array key=4 value=8 entries=4
#! kernel accept
#! rule loop
#! note a map value bound masked to 15
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
ldxdw %r1, [%r0+0]
and %r1, 15
mov %r2, 0
loop:
add %r2, 1
jlt %r2, %r1, loop
mov %r0, 0
exit
