// Two programs in one section, and a third in a section with a suffix.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int xdp_drop_short(struct xdp_md *ctx)
{
	if (ctx->data_end - ctx->data < 60)
		return XDP_DROP;
	return XDP_PASS;
}

SEC("xdp/devmap")
int xdp_devmap_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
