"""One rank of the DDP step-time bench: a ResNet-18-shaped CNN (11.2 M parameters, built here) on random data.

    python3 -m torch.distributed.run --standalone --nproc_per_node=4 --redirects 2 --tee 1 --log_dir DIR \
        bench/pytorch/ddp_bench.py --mode switchml

Modes:
  gloo           init_process_group("gloo"): DDP's own asynchronous all-reduce over Gloo.
  switchml       init_process_group("switchml"): DDP's buckets go to the appliance asynchronously (the new path).
  switchml-sync  init_process_group("switchml") plus a comm hook that all-reduces each bucket synchronously
                 through the same client and returns a completed future: the old bridge's behaviour, no overlap.

Every mode also times the same steps under ``ddp.no_sync()`` (no gradient all-reduce at all) as the compute-only
floor, so ``step - compute`` is the communication the backward pass did not hide. Rank 0 prints one line:

    BENCH mode=M ranks=N params=P bucket_mb=B step_ms_p50=S steps_per_s=R compute_ms_p50=C exposed_comm_ms=E
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker-agent", "python"))
import switchml  # noqa: E402


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


def resnet18(classes=10):
    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def sync_hook(client, bucket):
    """The old synchronous bridge: all-reduce the bucket, wait, return a completed future."""
    buffer = bucket.buffer()
    client.all_reduce(buffer, op="average")
    future = torch.futures.Future()
    future.set_result(buffer)
    return future


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("gloo", "switchml", "switchml-sync"), required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    args = parser.parse_args()

    dist.init_process_group("gloo" if args.mode == "gloo" else "switchml")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = resnet18()
    params = sum(p.numel() for p in model.parameters())
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    if args.mode == "switchml-sync":
        ddp.register_comm_hook(switchml.process_group().client, sync_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, args.image, args.image)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        optimizer.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        optimizer.step()

    def timed(count, no_sync):
        times = []
        for _ in range(count):
            dist.barrier()
            began = time.perf_counter()
            if no_sync:
                with ddp.no_sync():
                    step()
            else:
                step()
            times.append(time.perf_counter() - began)
        return times

    timed(args.warmups, False)
    steps = timed(args.steps, False)
    compute = timed(args.steps // 2 or 1, True)
    # the slowest rank sets the pace: report the maximum over ranks of each rank's median
    medians = torch.tensor([statistics.median(steps), statistics.median(compute)], dtype=torch.float32)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    step_s, compute_s = medians.tolist()
    extra = ""
    if args.mode != "gloo":
        stats = switchml.stats()
        extra = "".join(" %s=%d" % (key, stats.get(key, -1)) for key in (
            "retransmissions", "spuriousRetransmissions", "probes", "spuriousProbes", "allReduces"))
    if rank == 0:
        print("BENCH mode=%s ranks=%d params=%d bucket_mb=%g batch=%d image=%d step_ms_p50=%.1f steps_per_s=%.3f "
              "compute_ms_p50=%.1f exposed_comm_ms=%.1f%s" % (
                  args.mode, world, params, args.bucket_mb, args.batch, args.image, step_s * 1e3, 1 / step_s,
                  compute_s * 1e3, (step_s - compute_s) * 1e3, extra), flush=True)
    dist.destroy_process_group()
    # torch 1.13 can deadlock at interpreter exit when DDP's Reducer releases the Gloo process group (main thread in
    # ~ProcessGroupGloo waiting on a mutex, a Gloo thread waiting for the GIL; seen in about 1 of 10 Gloo cells):
    # everything is printed and the process group is destroyed (the switchml agent stopped), so skip the teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
