// XDP program counting packets per IPv4 protocol in a BTF-defined hash map.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 256);
} proto_count SEC(".maps");

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = 0;
	__u64 one = 1, *v;

	if (data + 24 <= data_end)
		key = *(__u8 *)(data + 23);
	v = bpf_map_lookup_elem(&proto_count, &key);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&proto_count, &key, &one, BPF_NOEXIST);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
