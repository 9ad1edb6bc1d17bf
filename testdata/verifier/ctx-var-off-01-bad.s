#! type socket
#! kernel reject "variable ctx access var_off=(0x0; 0x4) disallowed"
#! rule ctx-var-off
ldxw %r2, [%r1+0]
and %r2, 4
add %r1, %r2
ldxw %r0, [%r1+0]
exit
