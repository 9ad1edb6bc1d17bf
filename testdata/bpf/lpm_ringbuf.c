// An LPM trie keyed by IPv4 prefix, and a ring buffer the matches are reported through.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct lpm_key {
	__u32 prefixlen;
	__u32 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lpm_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
} prefixes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

SEC("xdp")
int xdp_lpm(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct lpm_key key = { .prefixlen = 32 };
	__u32 *rule;

	if (data + 34 > data_end)
		return XDP_PASS;
	key.addr = *(__u32 *)(data + 26);
	rule = bpf_map_lookup_elem(&prefixes, &key);
	if (!rule)
		return XDP_PASS;
	bpf_ringbuf_output(&events, rule, sizeof(*rule), 0);
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
