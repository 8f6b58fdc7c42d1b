"""When each DDP bucket of the bench model becomes ready during backward, and the step time that bounds.

    OMP_NUM_THREADS=1 /usr/bin/python3 bench/pytorch/bucket_timeline.py [--bucket-mb 25] [--ranks 4] [--gbit 1]

Runs --ranks copies of ddp_bench.py's model at once (one thread each, as the DDP bench's ranks share the cores),
no communication: forward, backward and the optimizer step of batch 8, hooks on every parameter's gradient. The
buckets are DDP's own assignment (torch.distributed._compute_bucket_assignment_by_size with DDP's 1 MiB first
bucket and --bucket-mb) as DDP rebuilds it after its first step: parameters taken in the order their gradients
became ready in step 0 (printed beside the first step's static assignment). Then it lays the buckets on a link of --gbit, one after
another, each starting when it is ready and the link is free, for a system that moves the tensor once per worker
(SwitchML, goodput 0.99) and one that moves 2(n-1)/n of it (a ring, Gloo), and prints the communication left
after backward ends: a lower bound on the exposed time, for an agent that never waits for a core. Nothing is
asserted; the figures are medians of steps 5 to 14.
"""
import argparse
import importlib.util
import multiprocessing
import os
import statistics


def measure(bucket_mb):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("ddp_bench", os.path.join(here, "ddp_bench.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    model = bench.resnet18()
    params = [p for p in model.parameters() if p.requires_grad]
    limits = [1024 * 1024, int(bucket_mb * 1024 * 1024)]
    # DDP's first step uses this static assignment; at its end DDP rebuilds the buckets in the order the gradients
    # became ready (Reducer::rebuild_buckets), and every later step uses those: both are computed, the rebuilt one
    # from step 0's hook times
    static, _ = dist._compute_bucket_assignment_by_size(params, limits, [False] * len(params))
    steps = bench.training_steps(model, 8, 32, 14)
    order = sorted(range(len(params)), key=lambda i: (steps[0][3][i], -i))
    buckets, _ = dist._compute_bucket_assignment_by_size(
        [params[i] for i in order], limits, [False] * len(params), order)
    rows = [(forward, backward, opt, [max(ready[i] for i in b) for b in buckets])
            for forward, backward, opt, ready in steps[4:]]
    sizes = [sum(params[i].numel() * 4 for i in bucket) / 1e6 for bucket in buckets]
    static_sizes = [sum(params[i].numel() * 4 for i in bucket) / 1e6 for bucket in static]
    med = lambda k: statistics.median(r[k] for r in rows)
    ready = [statistics.median(r[3][b] for r in rows) for b in range(len(buckets))]
    return med(0), med(1), med(2), sizes, ready, static_sizes


def exposed(sizes, ready, backward_ms, mb_per_ms):
    link_free = 0.0
    for size, at in sorted(zip(sizes, ready), key=lambda pair: pair[1]):
        link_free = max(link_free, at) + size / mb_per_ms
    return max(0.0, link_free - backward_ms)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket-mb", type=float, default=25)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--gbit", type=float, default=1.0)
    args = parser.parse_args()
    with multiprocessing.get_context("spawn").Pool(args.ranks) as pool:
        results = pool.map(measure, [args.bucket_mb] * args.ranks)
    forward, backward, opt, sizes, _, static_sizes = results[0]
    backward = statistics.median(r[1] for r in results)
    ready = [statistics.median(r[4][b] for r in results) for b in range(len(sizes))]
    line_mb_per_ms = args.gbit * 1e9 / 8 / 1e6 / 1e3
    print("bucket cap %g MB, %d ranks on %d cores: forward %.0f ms, backward %.0f ms, optimizer %.0f ms" % (
        args.bucket_mb, args.ranks, os.cpu_count(), statistics.median(r[0] for r in results), backward,
        statistics.median(r[2] for r in results)))
    print("  DDP's first step: buckets of %s MB; from step 2 on, rebuilt in gradient-ready order:" % (
        " + ".join("%.2f" % size for size in static_sizes)))
    for size, at in sorted(zip(sizes, ready), key=lambda pair: pair[1]):
        print("  bucket %6.2f MB ready %4.0f ms after backward starts" % (size, at))
    n = args.ranks
    once = exposed(sizes, ready, backward, line_mb_per_ms * 0.99)
    ring = exposed([s * 2 * (n - 1) / n for s in sizes], ready, backward, line_mb_per_ms)
    print("lower bound on the communication left after backward at %g Gbit/s: once per worker (SwitchML) %.0f ms, "
          "ring (Gloo) %.0f ms" % (args.gbit, once, ring))


if __name__ == "__main__":
    main()
