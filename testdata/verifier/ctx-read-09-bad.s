#! type socket
#! kernel reject "invalid bpf_context access"
#! rule ctx-read
#! note tc_classid is tc-only
ldxw %r0, [%r1+72]    # tc_classid
exit
