#! type socket
#! kernel reject "R1 !read_ok"
#! rule uninit-reg
#! note a helper call clobbers r1-r5
mov %r1, 1
call 7                # bpf_get_prandom_u32
mov %r0, %r1
exit
