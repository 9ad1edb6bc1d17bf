#! type socket
#! kernel reject "bpf_redirect"
#! rule helper-prog-type
mov %r2, 1
mov %r3, 0
call 23               # bpf_redirect
mov %r0, 0
exit
