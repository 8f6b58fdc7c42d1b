/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The ABI between the SwitchML XDP aggregator (switchml_xdp.bpf.c) and its Java control side
 * (io.switchml.offload.xdp.XdpMaps): map names, value layouts and counter indices. Java writes and reads
 * these structs byte for byte, so every field has a fixed size and offset (x86-64 and arm64 little-endian,
 * no implicit padding). Change one side, change the other and XdpMapsLayoutTest.
 */
#ifndef SWITCHML_XDP_H
#define SWITCHML_XDP_H

#define SML_MAX_LANES   2304  /* largest k the program aggregates: 36 blocks of 64 lanes, k = 2287 at MTU 9216 */
#define SML_LANE_BLOCK  64    /* lanes are aggregated in whole blocks of 64 */
#define SML_MAX_BLOCKS  (SML_MAX_LANES / SML_LANE_BLOCK)
#define SML_MAX_RANKS   64    /* largest world size: one 64-bit seen bitmap per slot version */
#define SML_MAX_SHARDS  4     /* appliance data ports the program serves */
#define SML_MAX_JOBS    1024  /* entries of sml_jobs */

/* sml_job.flags */
#define SML_JOB_MAC       0x1 /* verify MACs on updates and probes, sign results and NACKs */
#define SML_JOB_MULTICAST 0x2 /* completed results go to group_addr with XDP_TX; else XDP_PASS to the shard */

/* sml_config: array map of one entry, written once at attach. Ports in network order. */
struct sml_config {
	__u16 data_port[SML_MAX_SHARDS]; /* 0 for an unused shard */
	__u32 shard_count;               /* 1..SML_MAX_SHARDS */
	__u32 multicast_ttl;             /* IP TTL of multicast results */
};                                       /* 16 bytes */

/*
 * sml_jobs: hash map job id (host order) -> job, written by Java when a job becomes active (every rank has
 * joined) and deleted when it ends. Addresses and ports in network order, as they appear in packets.
 */
struct sml_job {
	__u32 world;       /* n, 1..SML_MAX_RANKS */
	__u32 lanes;       /* k, 1..the loaded program's sml_max_blocks * 64 */
	__u32 slots;       /* s, the job's global slot count */
	__u32 slot_base;   /* index in sml_slots of the job's global slot 0 */
	__u32 flags;       /* SML_JOB_* */
	__u32 elem_type;   /* the job's ElementType code: 1 int32 or 2 float32 */
	__u64 k0;          /* SipHash key, bytes 0..7 read little-endian */
	__u64 k1;          /* SipHash key, bytes 8..15 read little-endian */
	__u32 group_addr;  /* multicast group of the job's results */
	__u16 group_port[SML_MAX_SHARDS];
	__u32 member_addr[SML_MAX_RANKS];                 /* source address of each rank */
	__u16 member_port[SML_MAX_RANKS][SML_MAX_SHARDS]; /* source port of each rank, per shard */
	/* Written by the program: the first ordering violation (a contribution that disagrees with its slot),
	 * for the Java side to abort the job naming the rank. violation_rank is 0 until then, else 1 + rank. */
	__u32 violation_rank;  /* offset 820 */
	__u32 violation_slot;
	__u32 violation_count; /* its element count */
	__u64 violation_seq;   /* offset 832 */
};                         /* 840 bytes */

/* One pool version of one slot (Algorithm 3's per-version state). */
struct sml_cell {
	__u64 seen;        /* bit r: rank r contributed to this version's current or last round */
	__s64 chunk_seq;   /* chunk being aggregated or last completed; -1 before the first round */
	__u64 first_ns;    /* bpf_ktime_get_ns() of the round's first contribution */
	__u32 count;       /* contributions so far; 0 when idle or complete */
	__u16 elem_count;  /* of the round's first contribution */
	__s16 scale_exp;
	__s16 lookahead;   /* maximum of the contributions' look-ahead exponents */
	__u16 check;       /* byte-wise maximum of the contributions' check fields */
	__u8 exp_only;     /* 1 for an exponent-only round */
	__u8 elem_type;
	__u8 pad[2];
};                         /* 40 bytes; the version's lanes are in sml_lanes */

/* sml_slots: array map; entry slot_base + i holds both pool versions of the job's global slot i under one
 * lock, so that clearing a rank's bit in the other version (Algorithm 3) is atomic with the update. */
struct sml_slot {
	struct bpf_spin_lock lock;
	__u32 pad;
	struct sml_cell cell[2];
};                         /* 8 + 2 * 40 = 88 bytes */

/* sml_lanes: array map without BTF types; entry 2 * (slot_base + i) + version holds that pool version's lanes
 * (__s32, host order), guarded by the lock of sml_slots entry slot_base + i. Its value size, 4 * 64 * B bytes, and
 * the read-only global sml_max_blocks = B are set by the loader before load (switchml.appliance.xdp.max-lanes),
 * so a deployment whose k stays at 256 keeps 1 KiB per version while one at MTU 9000 gets 9 KiB. */

/* sml_stats: per-CPU array of __u64 counters. Indices 0..31 are drops by io.switchml.protocol.DropReason
 * ordinal (the same reasons the software shard counts); the rest are events. */
#define SML_STAT_DROP_BASE        0
#define SML_STAT_PACKETS          32 /* packets to a data port the program parsed (IPv4/UDP) */
#define SML_STAT_PASSED           33 /* handed to the kernel untouched: unknown job, not ours */
#define SML_STAT_UPDATES          34 /* updates for an offloaded job that reached its pool */
#define SML_STAT_ABSORBED         35 /* aggregated, slot still waiting: consumed in the kernel */
#define SML_STAT_COMPLETED        36 /* slots completed */
#define SML_STAT_RESULTS_TX       37 /* completed results multicast with XDP_TX */
#define SML_STAT_RESULTS_PASSED   38 /* completed results handed up to the Java shard for unicast fan-out */
#define SML_STAT_SHADOW_RESULTS   39 /* results from the shadow copy sent back to the sender (XDP_TX) */
#define SML_STAT_NACKS            40 /* NACKs sent back to a prober (XDP_TX) */
#define SML_STAT_PROBES           41 /* probes for an offloaded job that reached its pool */
#define SML_STAT_DUPLICATES       42 /* duplicate of an update still being aggregated */
#define SML_STAT_STALE            43 /* late copy of an update for a round that is over */
#define SML_STAT_TAIL_FAILED      44 /* a reply needed a longer packet and bpf_xdp_adjust_tail refused */
#define SML_STAT_MULTI_BUFFER     45 /* packets to a data port that arrived in more than one buffer (xdp.frags) */
#define SML_STAT_PENDINGS         46 /* PENDINGs sent back to a prober whose update the slot holds (XDP_TX) */
#define SML_STAT_COUNT            48

/* io.switchml.protocol.DropReason ordinals (XdpMapsLayoutTest checks them against the enum). */
#define SML_DROP_TRUNCATED         1
#define SML_DROP_BAD_MAGIC         2
#define SML_DROP_BAD_VERSION       3
#define SML_DROP_BAD_TYPE          4
#define SML_DROP_BAD_FLAGS         5
#define SML_DROP_BAD_RANK          6
#define SML_DROP_BAD_ELEMENT_TYPE  7
#define SML_DROP_BAD_ELEMENT_COUNT 8
#define SML_DROP_LENGTH_MISMATCH   9
#define SML_DROP_BAD_EXPONENT      10
#define SML_DROP_BAD_SLOT          11
#define SML_DROP_UNKNOWN_JOB       12
#define SML_DROP_NOT_MEMBER        13
#define SML_DROP_JOB_MISMATCH      14
#define SML_DROP_SLOT_MISMATCH     15
#define SML_DROP_BAD_MAC           16

/* XDP verdicts, for readers of test runs. */
#define SML_XDP_ABORTED 0
#define SML_XDP_DROP    1
#define SML_XDP_PASS    2
#define SML_XDP_TX      3

#endif
