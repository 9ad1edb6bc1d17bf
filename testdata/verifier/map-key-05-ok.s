#! type xdp
#! map m hash key=4 value=8 entries=16
#! kernel accept
#! rule map-key
#! note the key in the packet
ldxw %r2, [%r1+0]     # data
ldxw %r3, [%r1+4]     # data_end
mov %r4, %r2
add %r4, 4
jgt %r4, %r3, out
lddw %r1, map_idx(0)
call 1
out:
mov %r0, 0
exit
