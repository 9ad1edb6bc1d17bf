#! type xdp
#! map m array key=4 value=8 entries=4
#! kernel accept
#! rule ptr-leak
#! note privileged: a pointer may be stored in a map value
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
stxdw [%r0+0], %r10
mov %r0, 0
exit
