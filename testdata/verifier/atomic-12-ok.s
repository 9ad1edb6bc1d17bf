#! type xdp
#! map m array key=4 value=8 entries=4
#! kernel accept
#! rule atomic
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
mov %r1, 1
lock fetch or32 [%r0+0], %r1
mov %r0, %r1
exit
