// TC classifier: reads the __sk_buff fields the kernel's test run fills, writes the ones a
// tc program may write (mark, priority, tc_index, tc_classid) and reads them back, all into
// an array map (slot i: the sum over packets of field i below).
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 32);
} fields SEC(".maps");

static __always_inline void put(__u32 slot, __u64 value)
{
	__u64 *v = bpf_map_lookup_elem(&fields, &slot);

	if (v)
		*v += value;
}

SEC("tc")
int tc_fields(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	void *data_meta = (void *)(long)skb->data_meta;

	put(0, skb->len);
	put(1, skb->pkt_type);
	put(2, skb->mark);
	put(3, skb->queue_mapping);
	put(4, skb->protocol);
	put(5, skb->vlan_present);
	put(6, skb->vlan_tci);
	put(7, skb->vlan_proto);
	put(8, skb->priority);
	put(9, skb->ingress_ifindex);
	put(10, skb->ifindex);
	put(11, skb->tc_index);
	put(12, skb->cb[0] | skb->cb[4]);
	put(13, skb->hash);
	put(14, skb->tc_classid);
	put(15, data_end - data);
	put(16, data - data_meta);
	put(17, skb->napi_id);
	put(18, skb->tstamp);
	put(19, skb->wire_len);
	put(20, skb->gso_segs);
	put(21, skb->gso_size);
	put(22, skb->hwtstamp);

	skb->mark = skb->len * 3 + 1;
	skb->priority = skb->protocol ^ 0x12345;
	skb->tc_index = skb->len & 0xfff;
	skb->tc_classid = 0x100 | (skb->len & 0xff);
	skb->cb[1] = skb->len;

	put(23, skb->mark);
	put(24, skb->priority);
	put(25, skb->tc_index);
	put(26, skb->tc_classid);
	put(27, skb->cb[1]);

	if (skb->len > 100)
		return TC_ACT_SHOT;
	return skb->pkt_type == 0 ? TC_ACT_OK : TC_ACT_PIPE;
}

char _license[] SEC("license") = "GPL";
