#! type socket
#! kernel reject "misaligned stack access off 0+0+-4 size 8"
#! rule atomic
stdw [%r10-8], 0
mov %r1, 1
lock add [%r10-4], %r1
mov %r0, 0
exit
