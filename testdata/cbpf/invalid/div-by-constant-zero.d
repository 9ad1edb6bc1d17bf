ld #1
div #0
ret a
