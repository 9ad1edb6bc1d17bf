// A program of about 10,000 instructions (for weir-elf's parse-time measurement): 3,500
// unrolled hash steps over the first 64 bytes of the packet.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define STEP h = h * 31 + *(volatile __u8 *)(data + (__COUNTER__ & 63));
#define X5(s) s s s s s
#define X10(s) X5(s) X5(s)
#define X50(s) X10(X5(s))
#define X500(s) X50(X10(s))
#define X7(s) X5(s) s s
#define X3500(s) X500(X7(s))

SEC("xdp")
int xdp_big(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 h = 0;

	if (data + 64 > data_end)
		return XDP_PASS;
	X3500(STEP)
	return h & 1 ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
