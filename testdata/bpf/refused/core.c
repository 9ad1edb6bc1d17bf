// Two programs, one with a CO-RE relocation (refused) and one without (taken).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct xdp_md___local {
	__u32 data;
	__u32 data_end;
} __attribute__((preserve_access_index));

SEC("xdp")
int xdp_core(struct xdp_md___local *ctx)
{
	return ctx->data_end - ctx->data > 60 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int xdp_plain(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
