#! type socket
#! kernel accept
#! rule ld-abs
#! note r6-r9 survive
mov %r6, %r1
mov %r7, 5
ldabsw 0
mov %r0, %r7
exit
