#! type socket
#! kernel accept
#! rule isa-v4
mov %r0, 0x1234
bswap16 %r0
bswap32 %r0
bswap64 %r0
exit
