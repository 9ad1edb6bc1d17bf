// XDP: reserves a record per packet in a small ring buffer nobody consumes, fills it, and
// submits it (even IP protocol byte) or discards it (odd); counts in a per-CPU array the
// submits, discards and failed reservations (once the ring is full, as no consumer frees
// space).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 4);
} counts SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);

	if (v)
		*v += 1;
}

SEC("xdp")
int xdp_ringbuf(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 len = data_end - data;
	__u8 proto = 0;
	__u64 *rec;

	if (data + 24 <= data_end)
		proto = *(__u8 *)(data + 23);
	if (len & 8)
		rec = bpf_ringbuf_reserve(&events, 16, 0);
	else
		rec = bpf_ringbuf_reserve(&events, 8, 0);
	if (!rec) {
		count(2);
		return XDP_DROP;
	}
	rec[0] = len;
	if (proto & 1) {
		bpf_ringbuf_discard(rec, 0);
		count(1);
		return XDP_PASS;
	}
	bpf_ringbuf_submit(rec, 0);
	count(0);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
