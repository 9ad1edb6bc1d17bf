// A kfunc call, a .kconfig extern and a .ksyms variable, each in its own program, and a
// program in a section kind weir does not take; one plain program.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern void bpf_rcu_read_lock(void) __ksym;
extern unsigned int LINUX_KERNEL_VERSION __kconfig;
extern const void bpf_prog_active __ksym;

SEC("xdp")
int xdp_kfunc(struct xdp_md *ctx)
{
	bpf_rcu_read_lock();
	return XDP_PASS;
}

SEC("xdp")
int xdp_kconfig(struct xdp_md *ctx)
{
	return LINUX_KERNEL_VERSION > 0 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int xdp_ksym(struct xdp_md *ctx)
{
	return (long)&bpf_prog_active & 1 ? XDP_PASS : XDP_DROP;
}

SEC("kprobe/do_sys_open")
int probe_open(void *ctx)
{
	return 0;
}

SEC("tc")
int tc_plain(struct __sk_buff *skb)
{
	return 0;
}

char _license[] SEC("license") = "GPL";
