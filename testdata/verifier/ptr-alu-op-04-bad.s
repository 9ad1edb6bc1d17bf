#! type socket
#! kernel reject "subtraction from stack pointer prohibited"
#! rule ptr-alu-op
#! note sub of a constant from a stack pointer is refused (add a negative one instead)
mov %r2, %r10
sub %r2, 8
stdw [%r2+0], 0
mov %r0, 0
exit
