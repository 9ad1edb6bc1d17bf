#! type xdp
#! map m array key=4 value=8 entries=4
#! kernel reject "misaligned value access"
#! rule atomic
#! note 8 bytes at 4 of 8
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
mov %r1, 1
lock add [%r0+4], %r1
mov %r0, 0
exit
