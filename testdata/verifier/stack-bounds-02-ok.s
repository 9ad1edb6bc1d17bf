#! type socket
#! kernel accept
#! rule stack-bounds
#! note the lowest slot
stdw [%r10-512], 0
mov %r0, 0
exit
