// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * SwitchML slot-pool aggregation in the NIC driver's receive path (XDP).
 *
 * Parses wire protocol v1 (io.switchml.protocol.DataHeaderFlyweight) on the appliance's data ports and runs
 * Algorithm 3 of the SwitchML paper exactly as the reference engine io.switchml.appliance.engine.SlotPool does,
 * for int32 lanes (int32 jobs, and float32 jobs whose workers quantize to int32) and k up to the loaded maximum
 * (64 * sml_max_blocks, at most SML_MAX_LANES):
 * two pool versions, per-version seen bitmaps, counts, the look-ahead exponent maximum, the check-field maximum,
 * duplicates ignored, stale copies ignored, a retransmission into a completed slot answered from the shadow copy,
 * probes answered with the shadow result, a NACK or a PENDING. The checks before the pool are the software shard's, in its
 * order (io.switchml.appliance.transport.ShardProcessor): validate, type, job, member and source address, slot
 * ownership and geometry, MAC. Drops are counted by the software's DropReason ordinal.
 *
 * Verdicts:
 *   XDP_PASS  anything not for us (not IPv4/UDP, another port, IP options or fragments, a job not in sml_jobs)
 *             goes up untouched, so the software shards keep serving other jobs on the same port; and a
 *             completed result of a job without multicast goes up, rewritten in place, for the Java shard to
 *             fan out to every member.
 *   XDP_TX    a completed result of a multicast job, readdressed to the job's group; a result from the shadow
 *             copy, a NACK or a PENDING, back to the sender.
 *   XDP_DROP  consumed (absorbed into a slot, duplicate, stale) or dropped by reason.
 *
 * Each slot holds both pool versions under one bpf_spin_lock, so that an update and the clearing of the rank's
 * bit in the other version are one atomic step, as they are in the single-threaded software shard. No helper is
 * called while the lock is held; MACs are checked before and computed after it.
 *
 * Jumbo frames: the program is declared xdp.frags (BPF_F_XDP_HAS_FRAGS), so a driver may hand it a packet in
 * several buffers (veth does above about 3.5 KB, and refuses a program without the flag once the MTU exceeds
 * that). Only the Ethernet, IP, UDP and SwitchML headers are read in place (they lie in the first buffer); the lanes
 * are copied between the packet and a per-CPU scratch value with bpf_xdp_load_bytes / bpf_xdp_store_bytes outside
 * the lock, and the MAC is computed over the header in place and the lanes in the scratch value. Lane loops under
 * the lock run over blocks of SML_LANE_BLOCK lanes; above SML_SMALL_BLOCKS blocks with the bpf_iter_num open-coded
 * iterator, whose kfuncs the verifier allows while a spin lock is held (checked on 6.18; older kernels refuse
 * them there): it checks the loop body once instead of walking every block, so its cost does not grow with k.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "switchml_xdp.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The numbers iterator (kernel/bpf/bpf_iter.c), declared here because Debian 12's UAPI headers and libbpf 1.1
 * predate it. */
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

/* Blocks of SML_LANE_BLOCK lanes in one sml_lanes value: written by the loader before load (the verifier then
 * knows it as a constant and bounds every lane access by it); at most SML_MAX_BLOCKS. */
const volatile __u32 sml_max_blocks = 4;

/* Wire protocol v1: DataHeaderFlyweight. Every field sits at its natural alignment within the header. */
struct sml_hdr {
	__be16 magic;
	__u8 version;
	__u8 type;
	__be32 job_id;
	__be16 rank;
	__u8 flags;
	__u8 elem_type;
	__be32 slot;
	__be64 seq;
	__be16 count;
	__be16 check;
	__be16 scale;
	__be16 lookahead;
	__be64 mac;
};

#define SML_MAGIC          0x534D
#define SML_VERSION        1
#define SML_HDR_LEN        40
#define SML_MAC_WORD       4 /* MAC_OFFSET / 8 */
#define SML_T_UPDATE       1
#define SML_T_RESULT       2
#define SML_T_PROBE        3
#define SML_T_NACK         4
#define SML_T_PENDING      5
#define SML_F_VERSION      0x1
#define SML_F_EXP_ONLY     0x2
#define SML_F_RETRANSMIT   0x4
#define SML_KNOWN_FLAGS    0x7
#define SML_INT32          1
#define SML_FLOAT32        2
#define SML_BFLOAT16       4
#define SML_MAX_ELEMENTS   16366 /* (65507 - 40) / 4 */
#define SML_MAX_WORKERS    256
#define SML_NO_EXPONENT    (-32768)
#define SML_UNKNOWN_EXP    32767
#define SML_NON_FINITE_EXP 32766 /* a look-ahead only: the sender's next chunk holds a NaN or an infinity */
#define SML_MIN_EXP        (-126)
#define SML_MAX_EXP        128

/* SlotPool outcomes */
#define O_ABSORBED  0
#define O_COMPLETED 1
#define O_SHADOW    2
#define O_DUPLICATE 3
#define O_MISMATCH  4
#define O_STALE     5
#define O_PENDING   6
#define O_NACK      7
#define O_RESIZE    8 /* shadow result whose length differs from the packet's: resize, then write */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sml_config);
} sml_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SML_MAX_JOBS);
	__type(key, __u32);
	__type(value, struct sml_job);
} sml_jobs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096); /* resized by the loader (switchml.appliance.xdp.slots) */
	__type(key, __u32);
	__type(value, struct sml_slot);
} sml_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8192); /* resized by the loader: 2 per sml_slots entry */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 4 * SML_LANE_BLOCK * 4); /* set by the loader: 4 * SML_LANE_BLOCK * sml_max_blocks */
} sml_lanes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SML_STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} sml_stats SEC(".maps");

/* Per-CPU copy of a packet's lanes: the loops under the slot lock read and write this map value rather than
 * the packet, whose variable-length bounds checks would make the verifier walk every lane count separately.
 * bpf_xdp_load_bytes and bpf_xdp_store_bytes move the lanes in and out outside the lock. */
struct sml_lanes {
	union {
		__u32 lane[SML_MAX_LANES];     /* network order, as in the packet */
		__u64 word[SML_MAX_LANES / 2]; /* the same bytes as SipHash reads them */
	};
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sml_lanes);
} sml_scratch SEC(".maps");

static __always_inline void count(__u32 index)
{
	__u64 *value = bpf_map_lookup_elem(&sml_stats, &index);

	if (value)
		*value += 1;
}

static __always_inline int drop(__u32 reason)
{
	count(SML_STAT_DROP_BASE + reason);
	return XDP_DROP;
}

#define ROTL(x, b) (__u64)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                            \
	do {                                                                                                \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                                   \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                      \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                      \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                                   \
	} while (0)

#define SIP_WORD(m)                                                                                         \
	do {                                                                                                \
		v3 ^= (m);                                                                                  \
		SIPROUND;                                                                                   \
		SIPROUND;                                                                                   \
		v0 ^= (m);                                                                                  \
	} while (0)

/*
 * SipHash-2-4 of the SwitchML message of len bytes at offset SML_MSG_OFFSET of the packet, with the MAC word (bytes
 * 32..39) taken as zero: PacketMac.compute. The 40-byte header is read in place; the payload (len - 40 bytes, a
 * multiple of 4) from the per-CPU scratch value, where the caller has loaded it (an update) or written it (a
 * result): with xdp.frags the payload may lie in fragments that direct packet access cannot reach. A global
 * function, so the verifier checks it once rather than at every call site; the payload words run in an iterator
 * loop of 4 words per step, checked once whatever k is. Returns 0 when len is out of range or the header is not
 * in the first buffer (callers have checked that it is).
 */
#define SML_MSG_OFFSET (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define SML_MAX_WORDS  (SML_MAX_LANES / 2)
/* Up to this many blocks (k <= 384, so the default at MTU 1500, 358) lane loops are bounded loops that the verifier
 * walks; above, iterator loops that it checks once (see FOR_EACH_BLOCK). */
#define SML_SMALL_BLOCKS 6

__attribute__((noinline)) __u64 sml_mac(struct xdp_md *ctx, __u32 len, __u64 k0, __u64 k1)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u64 *hdr = (void *)(long)ctx->data + SML_MSG_OFFSET;
	__u64 v0 = k0 ^ 0x736f6d6570736575ULL;
	__u64 v1 = k1 ^ 0x646f72616e646f6dULL;
	__u64 v2 = k0 ^ 0x6c7967656e657261ULL;
	__u64 v3 = k1 ^ 0x7465646279746573ULL;
	__u64 b = ((__u64)len) << 56;
	struct sml_lanes *buf;
	struct bpf_iter_num it;
	__u32 zero = 0, words, i;
	int *step;

	if (len < SML_HDR_LEN || len > SML_HDR_LEN + 4 * SML_MAX_LANES)
		return 0;
	if ((void *)(hdr + SML_HDR_LEN / 8) > data_end)
		return 0;
	buf = bpf_map_lookup_elem(&sml_scratch, &zero);
	if (!buf)
		return 0;
#pragma unroll
	for (i = 0; i < SML_HDR_LEN / 8; i++) {
		__u64 m = i == SML_MAC_WORD ? 0 : hdr[i];

		SIP_WORD(m);
	}
	words = (len - SML_HDR_LEN) >> 3;
	if (sml_max_blocks <= SML_SMALL_BLOCKS) {
		/* k <= 384: a bounded loop of at most 48 steps, no call per step (see FOR_EACH_BLOCK) */
		for (i = 0; i < SML_SMALL_BLOCKS * SML_LANE_BLOCK / 8; i++) {
			__u32 w;

			if (i >= (words >> 2))
				break;
			w = i << 2;
			SIP_WORD(buf->word[w]);
			SIP_WORD(buf->word[w + 1]);
			SIP_WORD(buf->word[w + 2]);
			SIP_WORD(buf->word[w + 3]);
		}
	} else {
		bpf_iter_num_new(&it, 0, words >> 2);
		while ((step = bpf_iter_num_next(&it))) {
			__u32 w = (__u32)*step;

			if (w >= SML_MAX_WORDS / 4)
				break;
			w <<= 2;
			asm volatile("" : "+r"(w));
			SIP_WORD(buf->word[w]);
			SIP_WORD(buf->word[w + 1]);
			SIP_WORD(buf->word[w + 2]);
			SIP_WORD(buf->word[w + 3]);
		}
		bpf_iter_num_destroy(&it);
	}
#pragma unroll
	for (i = 0; i < 3; i++) {
		__u32 w = (words & ~3U) + i;

		if (w >= words || w >= SML_MAX_WORDS)
			break;
		SIP_WORD(buf->word[w]);
	}
	if (len & 4) {
		__u32 tail = words << 1;

		/* opaque to clang, which would drop the bound it can prove and the verifier cannot */
		asm volatile("" : "+r"(tail));
		if (tail >= SML_MAX_LANES)
			return 0;
		b |= buf->lane[tail];
	}
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/*
 * Copy the payload (len bytes of SwitchML message less the header) between the packet and the scratch value:
 * load (store = 0) or store (store = 1). The size comes from the datagram length, which validate() has tied to
 * the element count, and not from the element count itself: a helper's size argument must be exact for the
 * verifier, and the element count also bounds the lane loops, which would then be walked once per count.
 */
static __always_inline long lanes_io(struct xdp_md *ctx, struct sml_lanes *buf, __u32 len, int store)
{
	__u32 bytes = len - SML_HDR_LEN;

	asm volatile("" : "+r"(bytes));
	if (bytes < 4 || bytes > sizeof(buf->lane))
		return -1;
	return store ? bpf_xdp_store_bytes(ctx, SML_MSG_OFFSET + SML_HDR_LEN, buf->lane, bytes)
		     : bpf_xdp_load_bytes(ctx, SML_MSG_OFFSET + SML_HDR_LEN, buf->lane, bytes);
}

static __always_inline int valid_exponent(__s16 e)
{
	return e == SML_NO_EXPONENT || (e >= SML_MIN_EXP && e <= SML_MAX_EXP);
}

/* DataHeaderFlyweight.validate: 0 when well formed, else the DropReason ordinal. h is within bounds. */
static __always_inline __u32 validate(struct sml_hdr *h, __u32 len)
{
	__u32 type = h->type, flags = h->flags, elem = h->elem_type, count = bpf_ntohs(h->count);
	__u32 lane_bytes = elem == SML_INT32 || elem == SML_FLOAT32 ? 4 : 2;
	__s16 scale = (__s16)bpf_ntohs(h->scale), lookahead = (__s16)bpf_ntohs(h->lookahead);
	int header_only;

	if (h->magic != bpf_htons(SML_MAGIC))
		return SML_DROP_BAD_MAGIC;
	if (h->version != SML_VERSION)
		return SML_DROP_BAD_VERSION;
	if (type < SML_T_UPDATE || type > SML_T_PENDING)
		return SML_DROP_BAD_TYPE;
	if (flags & ~SML_KNOWN_FLAGS)
		return SML_DROP_BAD_FLAGS;
	if (bpf_ntohs(h->rank) >= SML_MAX_WORKERS)
		return SML_DROP_BAD_RANK;
	if (elem < SML_INT32 || elem > SML_BFLOAT16)
		return SML_DROP_BAD_ELEMENT_TYPE;
	header_only = (flags & SML_F_EXP_ONLY) || type == SML_T_PROBE || type == SML_T_NACK || type == SML_T_PENDING;
	if (header_only ? count != 0 : (count == 0 || count > SML_MAX_ELEMENTS))
		return SML_DROP_BAD_ELEMENT_COUNT;
	if (len != SML_HDR_LEN + count * lane_bytes)
		return SML_DROP_LENGTH_MISMATCH;
	if (!valid_exponent(scale) ||
	    !(valid_exponent(lookahead) || lookahead == SML_UNKNOWN_EXP || lookahead == SML_NON_FINITE_EXP) ||
	    (elem == SML_INT32 && (scale != SML_NO_EXPONENT || lookahead != SML_NO_EXPONENT)))
		return SML_DROP_BAD_EXPONENT;
	if ((__s32)bpf_ntohl(h->slot) < 0 || (__s64)bpf_be64_to_cpu(h->seq) < 0)
		return SML_DROP_BAD_SLOT;
	return 0;
}

static __always_inline __u16 combine_checks(__u16 a, __u16 b)
{
	__u16 high = (a & 0xFF00) > (b & 0xFF00) ? (a & 0xFF00) : (b & 0xFF00);
	__u16 low = (a & 0xFF) > (b & 0xFF) ? (a & 0xFF) : (b & 0xFF);

	return high | low;
}

/*
 * The lane loops, run under the slot's lock over the blocks that hold count lanes: lanes is the pool version's
 * sml_lanes value, buf the scratch copy of the packet's lanes (network order). A lane past count in the last block
 * holds a value that is never sent: a result carries exactly the round's element count, and a round's first
 * contribution overwrites every lane that round can send.
 *
 * Two forms, one chosen by the constant sml_max_blocks, so that the verifier walks only that one: for k up to 384
 * (SML_SMALL_BLOCKS) a bounded loop the verifier walks block by block, with no call per block (the fast path for
 * standard frames, as before jumbo frames); above, the block index comes from the bpf_iter_num iterator, unknown to the
 * verifier, which checks the body once, so that its work does not grow with k; the index is bounded by
 * sml_max_blocks, the constant the loader sized sml_lanes by.
 */

#define SML_BLOCKS(count) (((count) + SML_LANE_BLOCK - 1) / SML_LANE_BLOCK)
#define FOR_EACH_BLOCK(count, base, body)                                                                   \
	do {                                                                                                \
		__u32 i_;                                                                                   \
		if (sml_max_blocks <= SML_SMALL_BLOCKS) {                                                   \
			__u32 b_, n_ = SML_BLOCKS(count);                                                   \
			for (b_ = 0; b_ < SML_SMALL_BLOCKS; b_++) {                                         \
				__u32 base;                                                                 \
				if (b_ >= n_ || b_ >= sml_max_blocks)                                       \
					break;                                                              \
				base = b_ * SML_LANE_BLOCK;                                                 \
				_Pragma("unroll") for (i_ = 0; i_ < SML_LANE_BLOCK; i_++) {                 \
					__u32 j_ = base + i_;                                               \
					body;                                                               \
				}                                                                           \
			}                                                                                   \
		} else {                                                                                    \
			struct bpf_iter_num it_;                                                            \
			int *block_;                                                                        \
			bpf_iter_num_new(&it_, 0, SML_BLOCKS(count));                                       \
			while ((block_ = bpf_iter_num_next(&it_))) {                                        \
				__u32 base = (__u32)*block_;                                                \
				if (base >= sml_max_blocks || base >= SML_MAX_BLOCKS)                       \
					break;                                                              \
				base *= SML_LANE_BLOCK;                                                     \
				/* opaque to clang: base + i as an add, not an or (bounded badly) */        \
				asm volatile("" : "+r"(base));                                              \
				_Pragma("unroll") for (i_ = 0; i_ < SML_LANE_BLOCK; i_++) {                 \
					__u32 j_ = base + i_;                                               \
					body;                                                               \
				}                                                                           \
			}                                                                                   \
			bpf_iter_num_destroy(&it_);                                                         \
		}                                                                                           \
	} while (0)

/*
 * After a call that may move or resize the packet (bpf_xdp_adjust_tail, or the global function sml_mac, which the
 * verifier must assume changes packet data) every packet pointer is invalid to the verifier: derive them again from
 * the context and bound the header again.
 */
#define RELOAD_HEADERS(ctx, data, data_end, eth, ip, udp, h)                                                   \
	do {                                                                                                   \
		data = (void *)(long)(ctx)->data;                                                              \
		data_end = (void *)(long)(ctx)->data_end;                                                      \
		eth = data;                                                                                    \
		ip = (void *)(eth + 1);                                                                        \
		udp = (void *)(ip + 1);                                                                        \
		h = (void *)(udp + 1);                                                                         \
		if ((void *)(h + 1) > data_end)                                                                \
			return XDP_DROP;                                                                       \
	} while (0)

/*
 * SlotPool.writeResult: the update's header (magic, version, job, rank, slot) with the cell's type, flags,
 * exponents, chunk, count, element type and check, MAC zero; the cell's lanes go to the scratch value, which the
 * caller stores into the packet after the lock. Runs under the slot's lock.
 *
 */
#define WRITE_RESULT(h, c, out_flags, buf)                                                                  \
	do {                                                                                                \
		__u32 n = (c)->elem_count;                                                                  \
		(h)->type = SML_T_RESULT;                                                                   \
		(h)->flags = (out_flags);                                                                   \
		(h)->scale = bpf_htons((__u16)(c)->scale_exp);                                              \
		(h)->lookahead = bpf_htons((__u16)(c)->lookahead);                                          \
		(h)->seq = bpf_cpu_to_be64((__u64)(c)->chunk_seq);                                          \
		(h)->count = bpf_htons((__u16)n);                                                           \
		(h)->elem_type = (c)->elem_type;                                                            \
		(h)->check = bpf_htons((c)->check);                                                         \
		(h)->mac = 0;                                                                               \
		FOR_EACH_BLOCK(n, base_, (buf)->lane[j_] = bpf_htonl((__u32)lanes[j_]));                    \
		result_elements = n;                                                                        \
	} while (0)

static __always_inline __u16 ip_checksum(struct iphdr *ip)
{
	__u16 *words = (__u16 *)ip;
	__u32 sum = 0;
	int i;

	ip->check = 0;
#pragma unroll
	for (i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += words[i];
	sum = (sum & 0xFFFF) + (sum >> 16);
	sum = (sum & 0xFFFF) + (sum >> 16);
	return (__u16)~sum;
}

/* Send the packet back to where it came from: swap MACs, addresses and ports; set lengths for udp_len bytes
 * of UDP payload. */
static __always_inline void readdress_to_sender(struct ethhdr *eth, struct iphdr *ip, struct udphdr *udp, __u32 payload_len)
{
	unsigned char mac[ETH_ALEN];
	__be32 addr = ip->saddr;
	__be16 port = udp->source;

	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	ip->saddr = ip->daddr;
	ip->daddr = addr;
	ip->tot_len = bpf_htons(sizeof(*ip) + sizeof(*udp) + payload_len);
	ip->check = ip_checksum(ip);
	udp->source = udp->dest;
	udp->dest = port;
	udp->len = bpf_htons(sizeof(*udp) + payload_len);
	udp->check = 0;
}

/* Readdress a completed result to the job's multicast group, from this appliance's address and data port. */
static __always_inline void readdress_to_group(struct ethhdr *eth, struct iphdr *ip, struct udphdr *udp, __be32 group,
					       __be16 port, __u32 ttl)
{
	__u32 g = bpf_ntohl(group);

	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	eth->h_dest[0] = 0x01;
	eth->h_dest[1] = 0x00;
	eth->h_dest[2] = 0x5e;
	eth->h_dest[3] = (g >> 16) & 0x7F;
	eth->h_dest[4] = (g >> 8) & 0xFF;
	eth->h_dest[5] = g & 0xFF;
	ip->saddr = ip->daddr;
	ip->daddr = group;
	ip->ttl = ttl;
	ip->check = ip_checksum(ip);
	udp->source = udp->dest;
	udp->dest = port;
	udp->check = 0;
}

#define L2L4_LEN (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))

SEC("xdp.frags")
int switchml_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	struct sml_hdr *h;
	struct sml_config *cfg;
	struct sml_job *job;
	struct sml_slot *slot;
	struct sml_cell *c, *other;
	struct sml_lanes *buf;
	__s32 *lanes;
	__u32 zero = 0, shard, len, reason, type, flags, rank, slot_index, elements, job_id, key, lanes_key, ok_world;
	__u32 outcome, need_elements = 0, out_flags = 0, result_elements = 0, frame_len;
	__u64 bit, mac, now;
	__s64 seq;
	__s16 scale;
	int exp_only;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    (ip->frag_off & bpf_htons(0x3FFF)) != 0)
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&sml_config, &zero);
	if (!cfg)
		return XDP_PASS;
	for (shard = 0; shard < SML_MAX_SHARDS; shard++) {
		if (shard >= cfg->shard_count)
			return XDP_PASS;
		if (cfg->data_port[shard] != 0 && cfg->data_port[shard] == udp->dest)
			break;
	}
	if (shard >= SML_MAX_SHARDS)
		return XDP_PASS;

	count(SML_STAT_PACKETS);
	/* the whole frame, first buffer and fragments */
	frame_len = bpf_xdp_get_buff_len(ctx);
	if (frame_len > (__u32)(data_end - data))
		count(SML_STAT_MULTI_BUFFER);
	h = (void *)(udp + 1);
	len = bpf_ntohs(udp->len);
	len = len < sizeof(*udp) ? 0 : len - sizeof(*udp);
	if (len < SML_HDR_LEN || L2L4_LEN + len > frame_len || (void *)(h + 1) > data_end)
		return drop(SML_DROP_TRUNCATED);
	reason = validate(h, len);
	if (reason)
		return drop(reason);
	type = h->type;
	if (type != SML_T_UPDATE && type != SML_T_PROBE)
		return drop(SML_DROP_BAD_TYPE);

	job_id = bpf_ntohl(h->job_id);
	job = bpf_map_lookup_elem(&sml_jobs, &job_id);
	if (!job) {
		count(SML_STAT_PASSED);
		return XDP_PASS;
	}
	rank = bpf_ntohs(h->rank);
	ok_world = job->world <= SML_MAX_RANKS ? job->world : SML_MAX_RANKS;
	if (rank >= ok_world || rank >= SML_MAX_RANKS || job->member_addr[rank & (SML_MAX_RANKS - 1)] != ip->saddr ||
	    job->member_port[rank & (SML_MAX_RANKS - 1)][shard & (SML_MAX_SHARDS - 1)] != udp->source)
		return drop(SML_DROP_NOT_MEMBER);
	slot_index = bpf_ntohl(h->slot);
	elements = bpf_ntohs(h->count);
	if (slot_index % cfg->shard_count != shard || slot_index >= job->slots || h->elem_type != job->elem_type ||
	    elements > job->lanes || elements > SML_MAX_LANES)
		return drop(SML_DROP_JOB_MISMATCH);
	buf = bpf_map_lookup_elem(&sml_scratch, &zero);
	if (!buf)
		return XDP_ABORTED;
	if (elements > 0 && lanes_io(ctx, buf, len, 0) != 0)
		return drop(SML_DROP_TRUNCATED);
	if (job->flags & SML_JOB_MAC) {
		mac = sml_mac(ctx, len, job->k0, job->k1);
		RELOAD_HEADERS(ctx, data, data_end, eth, ip, udp, h);
		if (bpf_be64_to_cpu(h->mac) != mac)
			return drop(SML_DROP_BAD_MAC);
	}

	key = job->slot_base + slot_index;
	slot = bpf_map_lookup_elem(&sml_slots, &key);
	if (!slot)
		return drop(SML_DROP_JOB_MISMATCH);
	lanes_key = 2 * key + (h->flags & SML_F_VERSION);
	lanes = bpf_map_lookup_elem(&sml_lanes, &lanes_key);
	if (!lanes)
		return drop(SML_DROP_JOB_MISMATCH);

	flags = h->flags;
	seq = (__s64)bpf_be64_to_cpu(h->seq);
	scale = (__s16)bpf_ntohs(h->scale);
	exp_only = (flags & SML_F_EXP_ONLY) != 0;
	bit = 1ULL << (rank & 63);
	if (type == SML_T_PROBE)
		count(SML_STAT_PROBES);
	else
		count(SML_STAT_UPDATES);
	/* arrival time of a round's first contribution, for the slot deadline that the Java side scans; taken
	 * before the lock because no helper may run under it */
	now = bpf_ktime_get_ns();

	bpf_spin_lock(&slot->lock);
	if (flags & SML_F_VERSION) {
		c = &slot->cell[1];
		other = &slot->cell[0];
	} else {
		c = &slot->cell[0];
		other = &slot->cell[1];
	}

	if (type == SML_T_PROBE) {
		/* SlotPool.onProbe: changes no state */
		if (c->seen & bit) {
			if (c->chunk_seq != seq || c->exp_only != exp_only) {
				outcome = seq < c->chunk_seq ? O_STALE : O_MISMATCH;
			} else if (c->count == 0) {
				need_elements = c->elem_count;
				out_flags = flags | SML_F_RETRANSMIT;
				outcome = O_RESIZE;
			} else {
				outcome = O_PENDING;
			}
		} else if (c->count == 0 ? seq <= c->chunk_seq : seq < c->chunk_seq) {
			outcome = O_STALE;
		} else if (c->count != 0 && (c->chunk_seq != seq || c->exp_only != exp_only)) {
			outcome = O_MISMATCH;
		} else {
			outcome = O_NACK;
		}
	} else if (!(c->seen & bit)) {
		/* SlotPool.onUpdate, a rank the version has not seen */
		int first = c->count == 0;

		if (first ? seq <= c->chunk_seq : seq < c->chunk_seq) {
			outcome = O_STALE;
		} else if (!first && (c->chunk_seq != seq || c->elem_count != elements || c->scale_exp != scale ||
				      c->exp_only != exp_only || c->elem_type != h->elem_type)) {
			outcome = O_MISMATCH;
		} else {
			c->seen |= bit;
			other->seen &= ~bit;
			if (first) {
				c->chunk_seq = seq;
				c->elem_count = elements;
				c->scale_exp = scale;
				c->exp_only = exp_only;
				c->elem_type = h->elem_type;
				c->lookahead = (__s16)bpf_ntohs(h->lookahead);
				c->check = bpf_ntohs(h->check);
				c->first_ns = now;
				FOR_EACH_BLOCK(elements, base, lanes[j_] = (__s32)bpf_ntohl(buf->lane[j_]));
			} else {
				__s16 lookahead = (__s16)bpf_ntohs(h->lookahead);

				if (lookahead > c->lookahead)
					c->lookahead = lookahead;
				c->check = combine_checks(c->check, bpf_ntohs(h->check));
				FOR_EACH_BLOCK(elements, base,
					       lanes[j_] = (__s32)((__u32)lanes[j_] + bpf_ntohl(buf->lane[j_])));
			}
			if (c->count + 1 >= job->world) {
				c->count = 0;
				/* same count as the update: the result fits the packet */
				WRITE_RESULT(h, c, flags & ~SML_F_RETRANSMIT, buf);
				outcome = O_COMPLETED;
			} else {
				c->count += 1;
				outcome = O_ABSORBED;
			}
		}
	} else if (c->count == 0) {
		/* a retransmission into a completed slot version */
		if (seq < c->chunk_seq) {
			outcome = O_STALE;
		} else if (c->chunk_seq != seq || c->exp_only != exp_only) {
			outcome = O_MISMATCH;
		} else if (c->elem_count == elements) {
			WRITE_RESULT(h, c, flags | SML_F_RETRANSMIT, buf);
			outcome = O_SHADOW;
		} else {
			need_elements = c->elem_count;
			out_flags = flags | SML_F_RETRANSMIT;
			outcome = O_RESIZE;
		}
	} else {
		outcome = O_DUPLICATE;
	}
	bpf_spin_unlock(&slot->lock);

	switch (outcome) {
	case O_ABSORBED:
		count(SML_STAT_ABSORBED);
		return XDP_DROP;
	case O_DUPLICATE:
		count(SML_STAT_DUPLICATES);
		return XDP_DROP;
	case O_STALE:
		count(SML_STAT_STALE);
		return XDP_DROP;
	case O_MISMATCH:
		/* ShardProcessor aborts the job naming the rank; here the Java side reads the first violation */
		if (__sync_val_compare_and_swap(&job->violation_rank, 0, rank + 1) == 0) {
			job->violation_slot = slot_index;
			job->violation_count = elements;
			job->violation_seq = (__u64)seq;
		}
		return drop(SML_DROP_SLOT_MISMATCH);
	default:
		break;
	}

	if (outcome == O_RESIZE) {
		/* a shadow result whose length differs from the packet (a probe, or an update of another count):
		 * resize, then write it under the lock again if the version still holds that completed chunk */
		int delta = (int)(SML_HDR_LEN + 4 * need_elements) - (int)len;

		if (bpf_xdp_adjust_tail(ctx, delta) != 0) {
			/* bpf_xdp_adjust_tail grows a packet only within its last buffer and adds no fragment: a probe
			 * (82 bytes) cannot become a result of k above about 860. Answer it with a NACK instead, so that the
			 * worker resends its update at once, and that update (of the result's length) gets the shadow copy
			 * in place; dropping it would leave the worker to its retransmission timer, which in the rack at 1%
			 * loss let slots time out. An update of another count is dropped (its sender probes again). */
			count(SML_STAT_TAIL_FAILED);
			if (type != SML_T_PROBE)
				return XDP_DROP;
			RELOAD_HEADERS(ctx, data, data_end, eth, ip, udp, h);
			outcome = O_NACK;
		} else {
			RELOAD_HEADERS(ctx, data, data_end, eth, ip, udp, h);
			len = SML_HDR_LEN + 4 * need_elements;
			outcome = O_STALE;
			bpf_spin_lock(&slot->lock);
			c = (flags & SML_F_VERSION) ? &slot->cell[1] : &slot->cell[0];
			if ((c->seen & bit) && c->count == 0 && c->chunk_seq == seq && c->exp_only == exp_only &&
			    c->elem_count == need_elements) {
				WRITE_RESULT(h, c, out_flags, buf);
				outcome = O_SHADOW;
			}
			bpf_spin_unlock(&slot->lock);
			if (outcome != O_SHADOW) {
				count(SML_STAT_STALE);
				return XDP_DROP;
			}
		}
	}
	if (outcome == O_NACK || outcome == O_PENDING) {
		/* the probe's header with type NACK or PENDING and MAC zero */
		h->type = outcome == O_NACK ? SML_T_NACK : SML_T_PENDING;
		h->mac = 0;
	}

	if (result_elements > 0 && lanes_io(ctx, buf, len, 1) != 0)
		return XDP_DROP;
	if (job->flags & SML_JOB_MAC) {
		mac = sml_mac(ctx, len, job->k0, job->k1);
		RELOAD_HEADERS(ctx, data, data_end, eth, ip, udp, h);
		h->mac = bpf_cpu_to_be64(mac);
	}

	if ((void *)(udp + 1) > data_end || (void *)(ip + 1) > data_end || (void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (outcome == O_COMPLETED) {
		count(SML_STAT_COMPLETED);
		if (job->flags & SML_JOB_MULTICAST) {
			count(SML_STAT_RESULTS_TX);
			readdress_to_group(eth, ip, udp, job->group_addr, job->group_port[shard & (SML_MAX_SHARDS - 1)],
					   cfg->multicast_ttl);
			return XDP_TX;
		}
		/* up to the Java shard, which fans it out to every member; the payload changed */
		count(SML_STAT_RESULTS_PASSED);
		udp->check = 0;
		return XDP_PASS;
	}
	count(outcome == O_NACK ? SML_STAT_NACKS : outcome == O_PENDING ? SML_STAT_PENDINGS : SML_STAT_SHADOW_RESULTS);
	readdress_to_sender(eth, ip, udp, len);
	return XDP_TX;
}
