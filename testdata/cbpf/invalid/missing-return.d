ldh [12]
jeq #0x800 jt 2 jf 2
ld #1
