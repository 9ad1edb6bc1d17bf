ld M[3]
ret a
