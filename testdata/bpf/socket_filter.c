// Socket filter keeping only IPv4 TCP packets (legacy packet loads).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

unsigned long long load_byte(void *skb, unsigned long long off) asm("llvm.bpf.load.byte");
unsigned long long load_half(void *skb, unsigned long long off) asm("llvm.bpf.load.half");

SEC("socket")
int tcp_only(struct __sk_buff *skb)
{
	if (load_half(skb, 12) != ETH_P_IP)
		return 0;
	if (load_byte(skb, 23) != IPPROTO_TCP)
		return 0;
	return -1;
}

char _license[] SEC("license") = "Dual BSD/GPL";
