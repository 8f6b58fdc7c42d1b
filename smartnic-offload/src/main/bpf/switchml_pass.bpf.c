// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * XDP_PASS for the peer of a veth whose other end runs switchml_xdp in driver mode: veth delivers frames sent with
 * XDP_TX only when the receiving end has an XDP program attached. Not needed on a physical NIC. Two sections:
 * "xdp" for a peer at a standard MTU, "xdp.frags" for one above about 3500 bytes, where veth refuses a program that
 * does not declare multi-buffer support and drops multi-buffer frames for it.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("xdp")
int switchml_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp.frags")
int switchml_pass_frags(struct xdp_md *ctx)
{
	return XDP_PASS;
}
