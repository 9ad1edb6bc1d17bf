ld #1
lsh #32
ret a
