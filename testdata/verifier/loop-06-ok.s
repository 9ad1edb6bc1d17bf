#! type socket
#! kernel accept
#! rule loop
#! note nested, 4 x 4
mov %r0, 0
mov %r1, 0
outer:
mov %r2, 0
inner:
add %r0, 1
add %r2, 1
jlt %r2, 4, inner
add %r1, 1
jlt %r1, 4, outer
exit
