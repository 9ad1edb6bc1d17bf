#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule map-key
#! note privileged: a key on uninitialized stack is allowed
lddw %r1, map_idx(0)
mov %r2, %r10
add %r2, -4
call 1
mov %r0, 0
exit
