ld #1
st M[16]
ret #0
