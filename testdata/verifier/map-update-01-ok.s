#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule map-update
stw [%r10-4], 1
stdw [%r10-16], 2
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
mov %r3, %r10
add %r3, -16
mov %r4, 0
call 2                # bpf_map_update_elem
mov %r0, 0
exit
