ld [0xfff00000]
ret a
