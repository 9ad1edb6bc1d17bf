// A legacy `maps` section: struct bpf_map_def records (libbpf 1.x no longer declares the
// struct; it is written out here as older headers had it).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct bpf_map_def SEC("maps") legacy_counts = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 8,
};

struct bpf_map_def SEC("maps") legacy_flows = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = 8,
	.value_size = 16,
	.max_entries = 1024,
	.map_flags = BPF_F_NO_PREALLOC,
};

SEC("socket")
int legacy_prog(struct __sk_buff *skb)
{
	__u32 key = skb->len & 7;
	__u64 *v = bpf_map_lookup_elem(&legacy_counts, &key);
	__u64 fkey = skb->protocol;

	if (v)
		*v += 1;
	if (bpf_map_lookup_elem(&legacy_flows, &fkey))
		return -1;
	return 0;
}

char _license[] SEC("license") = "GPL";
