#!/usr/bin/python3
"""One rank of a PyTorch Gloo all-reduce benchmark over the same float32 tensors as `switchml worker bench`.

Each round: fill the tensor (rank-dependent values whose sum is exact in float32), meet the other ranks at a
barrier, time dist.all_reduce(SUM) from the call to its return (the tensor aggregation time, TAT), then check
every element of the result outside the timed region. Warm-up rounds are not timed. Prints one JSON object.
Needs Debian's python3-torch: run it with /usr/bin/python3.
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

from tat import peer_tensors, percentile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--ifname", help="GLOO_SOCKET_IFNAME: the interface Gloo's pairs use")
    parser.add_argument("--elements", type=int, required=True)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--timeout-sec", type=int, default=600)
    args = parser.parse_args()
    if args.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = args.ifname

    dist.init_process_group("gloo", init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=args.timeout_sec))
    tensor = torch.empty(args.elements, dtype=torch.float32)
    mine, expected = peer_tensors(args.elements, args.rank, args.world)
    samples_ms = []
    first_ms = None
    error = None
    timed_cpu_ns = 0
    for round_ in range(args.warmups + args.iterations):
        tensor.copy_(mine)
        dist.barrier()
        cpu_start = time.process_time_ns()
        start = time.perf_counter_ns()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        elapsed = time.perf_counter_ns() - start
        cpu = time.process_time_ns() - cpu_start
        if first_ms is None:
            first_ms = elapsed / 1e6
        if error is None and not torch.equal(tensor, expected):
            bad = int((tensor != expected).nonzero()[0])
            error = f"rank {args.rank} round {round_}: element {bad} is {float(tensor[bad])}, expected {float(expected[bad])}"
        # Every rank runs every round so that no rank waits forever for one that stopped.
        if round_ >= args.warmups:
            samples_ms.append(elapsed / 1e6)
            timed_cpu_ns += cpu
    dist.destroy_process_group()
    ordered = sorted(samples_ms)
    print(json.dumps({"system": "gloo", "rank": args.rank, "ok": error is None, "error": error,
                      "samples": len(samples_ms), "tatP50Ms": percentile(ordered, 50),
                      "tatP99Ms": percentile(ordered, 99), "tatMaxMs": ordered[-1] if ordered else float("nan"),
                      "tatMs": samples_ms, "firstTatMs": first_ms, "timedCpuSec": timed_cpu_ns / 1e9,
                      "torch": torch.__version__}), flush=True)
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
