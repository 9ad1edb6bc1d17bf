// Tail calls through a prog array, and a pinned map.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} jump_table SEC(".maps");

SEC("xdp")
int xdp_dispatch(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jump_table, ctx->rx_queue_index & 7);
	return XDP_PASS;
}

SEC("xdp")
int xdp_target(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
