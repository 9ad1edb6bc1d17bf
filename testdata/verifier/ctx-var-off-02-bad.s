#! type socket
#! kernel reject "dereference of modified ctx ptr"
#! rule ctx-var-off
add %r1, 4
ldxw %r0, [%r1+0]
exit
