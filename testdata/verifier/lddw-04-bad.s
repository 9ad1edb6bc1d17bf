#! type xdp
#! kernel reject "pseudo btf_id 7 in ldimm64 isn't KIND_VAR or KIND_FUNC"
#! rule lddw
#! note a BTF id without BTF
lddw %r1, btf_id(7)
mov %r0, 0
exit
