#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule map-update
stw [%r10-4], 1
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 3                # bpf_map_delete_elem
mov %r0, 0
exit
