// TC classifier: an array map, a global .data counter, a .bss total and a const volatile knob.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 4);
} lengths SEC(".maps");

const volatile __u32 min_len = 64;
const volatile __u32 verdict = TC_ACT_OK;
__u64 seen = 1;
__u64 total_bytes;

SEC("tc")
int tc_filter(struct __sk_buff *skb)
{
	__u32 slot = skb->len < min_len ? 0 : 1;
	__u64 *v = bpf_map_lookup_elem(&lengths, &slot);

	if (v)
		*v += 1;
	seen++;
	total_bytes += skb->len;
	return verdict;
}

char _license[] SEC("license") = "GPL";
