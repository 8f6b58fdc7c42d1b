// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A program the verifier must reject: it reads packet data without a bounds check. XdpLoaderTest loads it to show
 * that a rejection carries the verifier log's lines. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("xdp")
int unchecked_read(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;

	return data[20] == 7 ? XDP_DROP : XDP_PASS;
}
