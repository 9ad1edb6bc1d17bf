#! type socket
#! kernel reject "misaligned stack access"
#! rule stack-align
stdw [%r10-12], 0
mov %r0, 0
exit
