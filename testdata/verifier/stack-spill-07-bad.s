#! type xdp
#! kernel reject "infinite loop detected"
#! rule stack-spill
#! note the counter's 4-byte word overwritten by a store at another offset in its slot:
#! note the kernel forgets the spill, the counter is unknown again, the loop never ends
stw [%r10-8], 0
loop:
ldxw %r3, [%r10-8]
jge32 %r3, 16, out
add32 %r3, 1
stxw [%r10-8], %r3
stw [%r10-4], 0
ja loop
out:
mov %r0, 2
exit
