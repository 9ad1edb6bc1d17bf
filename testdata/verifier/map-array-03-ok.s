#! type xdp
#! map m array key=4 value=8 entries=4
#! kernel accept
#! rule map-array
#! note unknown key, null checked
call 7
stxw [%r10-4], %r0
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1
jeq %r0, 0, out
ldxdw %r1, [%r0+0]
out:
mov %r0, 0
exit
