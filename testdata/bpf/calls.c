// bpf-to-bpf calls: two programs calling static .text functions, one calling another.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 2);
} hits SEC(".maps");

__u32 scale = 3;

static __attribute__((noinline)) int bump(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&hits, &key);

	if (!v)
		return 0;
	*v += scale;
	return 1;
}

static __attribute__((noinline)) int classify(int len)
{
	if (len > 100)
		return bump(1);
	return bump(0);
}

SEC("xdp")
int xdp_calls(struct xdp_md *ctx)
{
	return classify(ctx->data_end - ctx->data) ? XDP_PASS : XDP_DROP;
}

SEC("tc")
int tc_calls(struct __sk_buff *skb)
{
	return bump(skb->len & 1);
}

char _license[] SEC("license") = "GPL";
