#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule map-ptr-arith
#! note a copy of the map pointer (moved through a register and the stack) is still one
lddw %r6, map_idx(0)
stxdw [%r10-16], %r6
stw [%r10-4], 0
ldxdw %r1, [%r10-16]
mov %r2, %r10
add %r2, -4
call 1                # bpf_map_lookup_elem
mov %r0, 0
exit
