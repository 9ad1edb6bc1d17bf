#! type sched_cls
#! kernel reject "invalid write to stack R3 off=-8 size=16"
#! rule helper-mem-size
#! note 16 bytes into an 8-byte region
mov %r2, 0
mov %r3, %r10
add %r3, -8
mov %r4, 16
call 26
mov %r0, 0
exit
