"""One rank of a plain DDP training script, run under torchrun with backend gloo or switchml.

    python3 -m torch.distributed.run --standalone --nproc_per_node=4 tests/torchrun_train.py --backend switchml

The script is what a user writes: ``init_process_group(backend)``, DDP, SGD; the only switchml line
is ``import switchml``. It trains an MLP on a seeded synthetic classification task (generated, the
same on every rank; each rank trains on its shard) and prints, per rank:

    EPOCH rank=R epoch=E loss=L            (mean training loss over all ranks, all-reduced)
    PROFILE rank=R ranges=N example=NAME   (switchml only: all-reduce ranges in the profiler)
    STATS rank=R allReduces=N ...          (switchml only: the agent's counters)
    RESULT rank=R backend=B acc=A losses=L1,L2,... digest=SHA step_ms=MS agent_pid=PID

Every run scales its loss as float16 AMP's GradScaler does (emulated: Debian's CPU-only torch disables
GradScaler without CUDA): the loss is multiplied by a scale (2^8 at first) before backward; when any gradient is
then not finite the step is skipped, the scale halved and ``SKIPPED rank=R epoch=E step=S finite_params=N`` printed
(N: how many parameters' gradients stayed finite), otherwise the gradients are divided by the scale and the
optimizer steps. The scale is a power of two, so the gradients are exactly those of the unscaled loss. The logged
loss is the unscaled one. ``--overflow-epoch E --overflow-step S --overflow-rank R``: rank R puts +inf into one
element of the middle Linear layer's weight gradient at that step, before DDP's bucket all-reduce, as a float16
overflow would; every rank must then skip that step (and only that one).

``--kill-rank R --kill-step S``: rank R kills itself with SIGKILL at step S of the second epoch;
the others print ``FAILED rank=R after_s=T error=...`` (T: seconds since their last completed
step) and exit 1.
"""

import argparse
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import switchml  # noqa: E402,F401 - registers the backend

FEATURES = 32
CLASSES = 8
TRAIN = 8192
TEST = 4096
BATCH = 64
INITIAL_SCALE = 2.0 ** 8


def data():
    g = torch.Generator().manual_seed(1234)
    centers = torch.randn(CLASSES, FEATURES, generator=g) * 0.6
    def sample(n):
        y = torch.randint(0, CLASSES, (n,), generator=g)
        x = centers[y] + torch.randn(n, FEATURES, generator=g)
        return x, y
    return sample(TRAIN), sample(TEST)


def check_dtypes(rank, world):
    """SUM and AVG of float16, bfloat16 and int32 through the appliance, exact here; float64 and int64 over the inner
    Gloo group, exact."""
    mult = torch.arange(1, world + 1).sum().item()  # sum over ranks of (rank + 1)
    for dtype, n in ((torch.float16, 100), (torch.bfloat16, 25), (torch.int32, 1000)):
        base = torch.arange(n)
        t = (base * (rank + 1)).to(dtype)
        dist.all_reduce(t)
        expected = (base * mult).to(dtype)
        assert t.dtype == dtype and torch.equal(t, expected), (dtype, "sum", t[:8], expected[:8])
        t = (base * (rank + 1)).to(dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        if dtype == torch.int32:
            expected = torch.div(base * mult, world, rounding_mode="trunc").to(dtype)
        else:
            expected = (base * mult / world).to(dtype)
        assert torch.equal(t, expected), (dtype, "avg", t[:8], expected[:8])
    big = torch.full((1000,), 2 ** 29 + rank, dtype=torch.int32)  # the int32 sum wraps, exactly
    dist.all_reduce(big)
    assert torch.equal(big, torch.full((1000,), (2 ** 29 * world + world * (world - 1) // 2 + 2 ** 31) % 2 ** 32 - 2 ** 31,
                                       dtype=torch.int32)), big[:4]
    # steps of 2^-40 that float32 would lose, exact in float64 whatever order Gloo sums in
    d = torch.full((3,), 1.0 + rank * 2.0 ** -40, dtype=torch.float64)
    dist.all_reduce(d)
    assert torch.equal(d, torch.full((3,), world + world * (world - 1) // 2 * 2.0 ** -40, dtype=torch.float64)), d
    c = torch.tensor([2 ** 53 + rank], dtype=torch.int64)  # an int64 count beyond float64's exact integers
    dist.all_reduce(c)
    assert c.item() == world * 2 ** 53 + world * (world - 1) // 2, c
    m = torch.tensor([float(rank)])
    dist.all_reduce(m, op=dist.ReduceOp.MAX)  # not SUM/AVG: the inner Gloo group
    assert m.item() == world - 1, m
    print("DTYPES rank=%d ok=true" % rank, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--kill-step", type=int, default=5)
    parser.add_argument("--stall-rank", type=int, default=-1, help="this rank stops (a checkpoint, say) in epoch 1")
    parser.add_argument("--stall-s", type=float, default=0.0)
    parser.add_argument("--overflow-epoch", type=int, default=-1)
    parser.add_argument("--overflow-step", type=int, default=-1)
    parser.add_argument("--overflow-rank", type=int, default=-1, help="this rank's gradient overflows (+inf) once")
    args = parser.parse_args()

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(100 + rank)  # different initial weights per rank: DDP's broadcast must fix them
    (x_train, y_train), (x_test, y_test) = data()
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, CLASSES))
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.02)  # several buckets, so they overlap
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    shard = torch.arange(rank, TRAIN, world)
    params = list(model.parameters())
    # the middle layer's weight. DDP's first bucket holds up to 1 MiB whatever bucket_cap_mb says, so the whole model
    # (21768 floats) is one bucket: the other parameters' gradients are the rest of that all-reduce and stay finite
    overflowing = model[2].weight
    agent_pid = None
    if args.backend == "switchml":
        agent_pid = switchml.process_group().agent_pid
        check_dtypes(rank, world)
    print("AGENT rank=%d pid=%s" % (rank, agent_pid), flush=True)

    losses, step_times = [], []
    scale = INITIAL_SCALE
    last_step = time.monotonic()
    try:
        for epoch in range(args.epochs):
            order = shard[torch.randperm(shard.numel(), generator=torch.Generator().manual_seed(epoch))]
            total = torch.zeros(2)
            for step, start in enumerate(range(0, order.numel() - BATCH + 1, BATCH)):
                if epoch == 1 and rank == args.kill_rank and step == args.kill_step:
                    print("KILLING rank=%d epoch=%d step=%d" % (rank, epoch, step), flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                if epoch == 1 and rank == args.stall_rank and step == 2:
                    print("STALLING rank=%d for_s=%.1f" % (rank, args.stall_s), flush=True)
                    time.sleep(args.stall_s)
                index = order[start:start + BATCH]
                began = time.perf_counter()
                optimizer.zero_grad()
                loss = F.cross_entropy(ddp(x_train[index]), y_train[index])
                hook = None
                if (epoch, step, rank) == (args.overflow_epoch, args.overflow_step, args.overflow_rank):
                    # a tensor hook on a leaf runs before its gradient is accumulated, so before DDP's
                    # reducer copies it into its bucket and all-reduces it
                    def overflow(grad):
                        grad = grad.clone()
                        grad[64, 3] = float("inf")
                        return grad
                    hook = overflowing.register_hook(overflow)
                    print("OVERFLOW rank=%d epoch=%d step=%d" % (rank, epoch, step), flush=True)
                scaled = loss * scale
                if epoch == args.epochs - 1 and step == 1 and args.backend == "switchml":
                    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                        scaled.backward()
                    names = [e.name for e in prof.events() if e.name.startswith("switchml::all_reduce")]
                    print("PROFILE rank=%d ranges=%d example=%s" % (rank, len(names), names[0].replace(" ", "") if names else "none"), flush=True)
                else:
                    scaled.backward()
                if hook is not None:
                    hook.remove()
                finite = [bool(torch.isfinite(p.grad).all()) for p in params]
                if all(finite):
                    for p in params:
                        p.grad.div_(scale)
                    optimizer.step()
                else:  # GradScaler's step: found inf, skip the optimizer and back off the scale
                    scale /= 2
                    print("SKIPPED rank=%d epoch=%d step=%d finite_params=%d scale=%g"
                          % (rank, epoch, step, sum(finite), scale), flush=True)
                step_times.append(time.perf_counter() - began)
                last_step = time.monotonic()
                total += torch.tensor([loss.item(), 1.0])
            dist.all_reduce(total)
            losses.append(total[0].item() / total[1].item())
            print("EPOCH rank=%d epoch=%d loss=%.6f" % (rank, epoch, losses[-1]), flush=True)
    except Exception as ex:  # noqa: BLE001 - report what the rank saw, as a user would
        message = " ".join(str(ex).split())
        print("FAILED rank=%d after_s=%.2f error=%s" % (rank, time.monotonic() - last_step, message[:600]), flush=True)
        sys.exit(1)

    with torch.no_grad():
        acc = (model(x_test).argmax(dim=1) == y_test).float().mean().item() * 100
        digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
    if args.backend == "switchml":
        stats = switchml.stats()
        print("STATS rank=%d %s" % (rank, " ".join("%s=%s" % kv for kv in sorted(stats.items()))), flush=True)
    step_times.sort()
    print("RESULT rank=%d backend=%s acc=%.3f losses=%s digest=%s step_ms=%.3f agent_pid=%s"
          % (rank, args.backend, acc, ",".join("%.5f" % l for l in losses), digest,
             step_times[len(step_times) // 2] * 1e3, agent_pid), flush=True)
    dist.destroy_process_group()
    if agent_pid is not None:
        try:
            os.kill(agent_pid, 0)
            alive = True
        except OSError:
            alive = False
        print("AGENT_AFTER_DESTROY rank=%d alive=%s" % (rank, alive), flush=True)


if __name__ == "__main__":
    main()
