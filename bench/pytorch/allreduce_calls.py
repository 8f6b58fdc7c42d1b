"""Time init_process_group and each of the first all-reduces of one tensor, as a training job's first steps see them.

    SWITCHML_APPLIANCE=127.0.0.1:7470 python3 -m torch.distributed.run --standalone --nproc_per_node=4 \\
        --redirects 2 --tee 1 bench/pytorch/allreduce_calls.py --backend switchml --size-mb 100 --calls 8

Rank 0 prints one line ``CALLS backend=B size_mb=S init_s=I first_ms=F steady_ms=M ratio=R calls_ms=...``: the
process group's creation (for switchml: starting or reaching the agent, joining the job), each call's wall time,
the median of the calls after the third as the steady state, and first / steady. Every rank checks its sum.
Nothing is asserted about time.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

# the package from this tree, as ddp_bench.py does
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker-agent", "python"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True, choices=("gloo", "switchml"))
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--calls", type=int, default=8)
    args = parser.parse_args()
    if args.calls < 4:
        parser.error("--calls must be 4 or more (the steady state is the median after the third)")
    if args.backend == "switchml":
        import switchml  # noqa: F401 - registers the backend
    began = time.perf_counter()
    dist.init_process_group(args.backend)
    init_s = time.perf_counter() - began
    rank, world = dist.get_rank(), dist.get_world_size()
    count = int(args.size_mb * (1 << 20) / 4)
    base = (torch.arange(count, dtype=torch.float32) % 8) + 1
    calls = []
    for _ in range(args.calls):
        tensor = base * (rank + 1)
        began = time.perf_counter()
        dist.all_reduce(tensor)
        calls.append(time.perf_counter() - began)
        expected = base * (world * (world + 1) / 2)
        if not torch.allclose(tensor, expected, rtol=1e-5):
            raise SystemExit("rank %d: wrong sum" % rank)
    steady = statistics.median(calls[3:])
    if rank == 0:
        print("CALLS backend=%s size_mb=%g init_s=%.2f first_ms=%.0f steady_ms=%.0f ratio=%.2f calls_ms=%s"
              % (args.backend, args.size_mb, init_s, calls[0] * 1e3, steady * 1e3, calls[0] / steady,
                 ",".join("%.0f" % (c * 1e3) for c in calls)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
