#! type xdp
#! kernel accept
#! rule stack-spill
#! note a loop counter kept in a 4-byte stack word (a narrow spill): the kernel tracks it
#! note through the store and the fill, so the loop is bounded (weir once lost it and
#! note called the loop infinite)
stw [%r10-8], 0
loop:
ldxw %r3, [%r10-8]
jge32 %r3, 16, out
add32 %r3, 1
stxw [%r10-8], %r3
ja loop
out:
mov %r0, 2
exit
