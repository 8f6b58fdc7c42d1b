// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * XDP_PASS for the peer of a veth whose other end runs switchml_xdp in driver mode: veth delivers frames sent with
 * XDP_TX only when the receiving end has an XDP program attached. Not needed on a physical NIC.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("xdp")
int switchml_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
