// A map of maps: refused (the whole object, naming the map).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct inner);
} outer SEC(".maps");

SEC("xdp")
int xdp_outer(struct xdp_md *ctx)
{
	return bpf_map_lookup_elem(&outer, &(__u32){0}) ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
