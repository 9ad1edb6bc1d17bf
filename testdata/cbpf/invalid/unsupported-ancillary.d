ld [0xfffff00c]
ret a
