#! type socket
#! kernel reject "invalid write to stack"
#! rule stack-bounds
#! note above the frame
stw [%r10+0], 0
mov %r0, 0
exit
