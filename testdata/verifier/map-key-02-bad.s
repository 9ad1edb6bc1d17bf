#! type xdp
#! map m hash key=8 value=8 entries=16
#! kernel reject "invalid read from stack R2 off=-4 size=8"
#! rule map-key
#! note 8-byte key from 4 initialized bytes at the top of the frame
stw [%r10-4], 0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
mov %r0, 0
exit
