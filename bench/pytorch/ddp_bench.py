"""One rank of the DDP step-time bench: a ResNet-18-shaped CNN (11.2 M parameters, built here) on random data.

    python3 -m torch.distributed.run --standalone --nproc_per_node=4 --redirects 2 --tee 1 --log_dir DIR \
        bench/pytorch/ddp_bench.py --mode switchml

Modes:
  gloo           init_process_group("gloo"): DDP's own asynchronous all-reduce over Gloo.
  switchml       init_process_group("switchml"): DDP's buckets go to the appliance asynchronously (the new path).
  switchml-sync  init_process_group("switchml") plus a comm hook that all-reduces each bucket synchronously
                 through the same client and returns a completed future: the old bridge's behaviour, no overlap.
  switchml-job   as switchml; run.sh sets SWITCHML_HOST_AGENT=job, so that local rank 0 starts one agent for the
                 job's ranks on this host, which sums them (the switchml mode runs with an agent per rank).

``--compute emulated`` asks what the same training would see on hosts whose compute runs elsewhere (an accelerator):
each rank first trains the real model for a few steps, all ranks at once as in the bench, and records its forward
time, the time each parameter's gradient became ready in backward and the optimizer's time; rank 0's profile is
shared. The timed model then has the same parameters (same shapes, same registration order, so DDP builds the
same buckets) in a chain of autograd functions that sleep for those times instead of computing, and hand each
gradient to DDP at its recorded moment; the optimizer step is a sleep too. The host's CPU is then left to the
communication (DDP's own bucket copies included), as on a GPU host. The emulated model has no BatchNorm buffers,
so DDP's per-step broadcast of them (a few KB over the inner Gloo group) is absent in that mode. ``--compute-scale F`` multiplies the profiled
times by F: an accelerator 1/F times as fast as these shared cores. ``--compute-profile FILE`` keeps the profile
in FILE and reuses it when FILE exists, so that every cell of a run emulates the same compute (bench/pytorch/run.sh
passes one per run). An emulation, not a GPU: it says nothing about
CUDA staging or PCIe.

Every mode also times the same steps under ``ddp.no_sync()`` (no gradient all-reduce at all) as the compute-only
floor, so ``step - compute`` is the communication the backward pass did not hide. Rank 0 prints one line:

    BENCH mode=M ranks=N params=P bucket_mb=B step_ms_p50=S steps_per_s=R compute_ms_p50=C exposed_comm_ms=E
          rank_cpu_ms_per_step=... compute_cpu_ms_per_step=... [agent_cpu_ms_per_step=...]
          [appliance_cpu_ms_per_step=...] comm_cpu_ms_per_step=...

CPU is user + system time from /proc (every thread of the process), per timed step, averaged over the ranks: the
rank's own process in the DDP steps and in the no_sync steps, the rank's agent (switchml modes), and the
appliance when ``SWITCHML_BENCH_APPLIANCE_PID`` names it (bench/pytorch/run.sh sets it; in the namespace rack it
shares the host's cores with the ranks). ``comm_cpu_ms_per_step`` is what the all-reduces cost all ranks together
per step: ranks x (rank + agent - compute) + appliance.
"""

import argparse
import json
import os
import statistics
import subprocess
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


_TICK = os.sysconf("SC_CLK_TCK")


def xdp_program_seconds(prog):
    """Run time of the appliance's XDP program with id prog (kernel.bpf_stats_enabled), 0 when there is none."""
    if not prog:
        return 0.0
    shown = subprocess.run(["bpftool", "-j", "prog", "show", "id", prog], capture_output=True, text=True, check=True)
    return json.loads(shown.stdout).get("run_time_ns", 0) / 1e9


def cpu_seconds(pid="self"):
    """User + system CPU seconds of a process (all its threads), 0 when there is none to read."""
    if pid is None:
        return 0.0
    try:
        with open("/proc/%s/stat" % pid) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def training_steps(model, batch, image, steps):
    """Train ``model`` alone (no DDP, SGD with momentum on random data) for ``steps`` steps and return one row per
    step: forward ms, backward ms, optimizer ms, and for every parameter (in registration order) the ms after
    backward began at which its gradient was ready."""
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, image, image)
    y = torch.randint(0, 10, (batch,))
    stamps = [0.0] * len(params)
    for i, p in enumerate(params):
        p.register_hook(lambda g, i=i: stamps.__setitem__(i, time.perf_counter()) or g)
    rows = []
    for _ in range(steps):
        optimizer.zero_grad()
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        rows.append(((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, [(t - t1) * 1e3 for t in stamps]))
    return rows


def profile_compute(model, batch, image, steps=8, warmups=3):
    """Medians of :func:`training_steps` after ``warmups`` steps: forward ms, optimizer ms, and each parameter's
    gradient-ready ms."""
    rows = training_steps(model, batch, image, warmups + steps)[warmups:]
    return (statistics.median(r[0] for r in rows), statistics.median(r[2] for r in rows),
            [statistics.median(r[3][i] for r in rows) for i in range(len(rows[0][3]))])


class _SleepLink(torch.autograd.Function):
    """One link of the emulated model: sleeps its forward share, and in backward sleeps until its parameter's
    gradient would be ready, then returns a constant gradient of the parameter's shape."""

    @staticmethod
    def forward(ctx, h, weight, forward_s, backward_s, gradient):
        ctx.backward_s, ctx.gradient = backward_s, gradient
        if forward_s > 0:
            time.sleep(forward_s)
        return h.clone()

    @staticmethod
    def backward(ctx, grad):
        if ctx.backward_s > 0:
            time.sleep(ctx.backward_s)
        return grad, ctx.gradient, None, None, None


class EmulatedModel(nn.Module):
    """The bench model's parameters, its compute replaced by sleeps of the profiled duration (see --compute)."""

    def __init__(self, shapes, forward_ms, ready_ms):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.zeros(shape)) for shape in shapes])
        # backward runs the chain from its end: the parameter ready first is the chain's last link
        order = sorted(range(len(shapes)), key=lambda i: ready_ms[i])
        self.links = []
        previous = 0.0
        for i in order:
            self.links.append((i, (ready_ms[i] - previous) / 1e3))
            previous = ready_ms[i]
        self.links.reverse()
        self.forward_s = forward_ms / 1e3
        self.gradients = [torch.full(shape, 1e-3) for shape in shapes]

    def forward(self, x):
        h = x.new_zeros(x.shape[0]).requires_grad_()
        for n, (i, backward_s) in enumerate(self.links):
            h = _SleepLink.apply(h, self.weights[i], self.forward_s if n == 0 else 0.0, backward_s,
                                 self.gradients[i])
        return h


def sync_hook(client, bucket):
    """The old synchronous bridge: all-reduce the bucket, wait, return a completed future."""
    buffer = bucket.buffer()
    client.all_reduce(buffer, op="average")
    future = torch.futures.Future()
    future.set_result(buffer)
    return future


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("gloo", "switchml", "switchml-sync", "switchml-job"), required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--compute", choices=("cpu", "emulated"), default="cpu")
    parser.add_argument("--compute-scale", type=float, default=1.0)
    parser.add_argument("--compute-profile", metavar="FILE")
    args = parser.parse_args()
    if args.compute_scale != 1.0 and args.compute != "emulated":
        parser.error("--compute-scale needs --compute emulated")
    if args.compute_scale <= 0:
        parser.error("--compute-scale must be positive")

    dist.init_process_group("gloo" if args.mode == "gloo" else "switchml")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    model = resnet18()
    params = sum(p.numel() for p in model.parameters())
    profile_text = ""
    if args.compute == "emulated":
        shape = {"batch": args.batch, "image": args.image, "params": params}
        if args.compute_profile and os.path.exists(args.compute_profile):
            with open(args.compute_profile) as saved:
                profile = [json.load(saved)]
            if profile[0].get("shape") != shape:
                raise SystemExit("ddp_bench: %s was profiled for %s, not %s" % (
                    args.compute_profile, profile[0].get("shape"), shape))
        else:
            dist.barrier()   # all ranks profile at once: the compute times are those of the bench's shared cores
            forward, optimizer_step, ready = profile_compute(model, args.batch, args.image)
            profile = [{"shape": shape, "forward_ms": forward, "optimizer_ms": optimizer_step, "ready_ms": ready}]
            dist.broadcast_object_list(profile, src=0)
            if rank == 0 and args.compute_profile:
                with open(args.compute_profile, "w") as saved:
                    json.dump(profile[0], saved)
        forward_ms = profile[0]["forward_ms"] * args.compute_scale
        optimizer_ms = profile[0]["optimizer_ms"] * args.compute_scale
        ready_ms = [ms * args.compute_scale for ms in profile[0]["ready_ms"]]
        model = EmulatedModel([p.shape for p in model.parameters()], forward_ms, ready_ms)
        profile_text = (" compute_scale=%g emulated_forward_ms=%.0f emulated_backward_ms=%.0f "
                        "emulated_optimizer_ms=%.0f" % (args.compute_scale, forward_ms, max(ready_ms), optimizer_ms))
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    if args.mode == "switchml-sync":
        ddp.register_comm_hook(switchml.process_group().client, sync_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, args.image, args.image)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        optimizer.zero_grad()
        if args.compute == "emulated":
            ddp(x).sum().backward()
            time.sleep(optimizer_ms / 1e3)
        else:
            F.cross_entropy(ddp(x), y).backward()
            optimizer.step()

    agent_pid = None if args.mode == "gloo" else switchml.process_group().agent_pid
    appliance_pid = os.environ.get("SWITCHML_BENCH_APPLIANCE_PID") if args.mode != "gloo" else None
    # read by rank 0 only, the one whose figure is reported (one bpftool call before and after each timed loop)
    xdp_prog = os.environ.get("SWITCHML_BENCH_XDP_PROG_ID") if args.mode != "gloo" and rank == 0 else None
    cpu = {}

    def timed(count, no_sync):
        times = []
        before = (cpu_seconds(), cpu_seconds(agent_pid), cpu_seconds(appliance_pid), xdp_program_seconds(xdp_prog))
        for _ in range(count):
            dist.barrier()
            began = time.perf_counter()
            if no_sync:
                with ddp.no_sync():
                    step()
            else:
                step()
            times.append(time.perf_counter() - began)
        after = (cpu_seconds(), cpu_seconds(agent_pid), cpu_seconds(appliance_pid), xdp_program_seconds(xdp_prog))
        cpu[no_sync] = [(a - b) / count for a, b in zip(after, before)]
        return times

    timed(args.warmups, False)
    steps = timed(args.steps, False)
    compute = timed(args.steps // 2 or 1, True)
    # the slowest rank sets the pace: report the maximum over ranks of each rank's median
    medians = torch.tensor([statistics.median(steps), statistics.median(compute)], dtype=torch.float32)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    step_s, compute_s = medians.tolist()
    # per step, averaged over the ranks: rank (DDP steps), rank (no_sync steps), agent; the appliance as rank 0 read it
    cpu_means = torch.tensor([cpu[False][0], cpu[True][0], cpu[False][1], cpu[False][2] if rank == 0 else 0.0,
                              cpu[False][3] if rank == 0 else 0.0], dtype=torch.float32)
    dist.all_reduce(cpu_means)
    rank_cpu, compute_cpu, agent_cpu = (cpu_means[:3] / world).tolist()
    appliance_cpu, xdp_program = cpu_means[3].item(), cpu_means[4].item()
    cpu_text = " rank_cpu_ms_per_step=%.0f compute_cpu_ms_per_step=%.0f" % (rank_cpu * 1e3, compute_cpu * 1e3)
    if agent_pid is not None:
        cpu_text += " agent_cpu_ms_per_step=%.0f" % (agent_cpu * 1e3)
    if appliance_pid is not None:
        cpu_text += " appliance_cpu_ms_per_step=%.0f" % (appliance_cpu * 1e3)
    cpu_text += " comm_cpu_ms_per_step=%.0f" % ((world * (rank_cpu + agent_cpu - compute_cpu) + appliance_cpu) * 1e3)
    if xdp_prog is not None:   # rank 0, which prints the line
        # softirq time, already inside the CPU of whichever process it ran beside (mostly the senders'): not added
        cpu_text += " xdp_prog_ms_per_step=%.1f" % (xdp_program * 1e3)
    extra = ""
    if args.mode != "gloo":
        stats = switchml.stats()
        extra = "".join(" %s=%d" % (key, stats.get(key, -1)) for key in (
            "retransmissions", "spuriousRetransmissions", "probes", "spuriousProbes", "pendings", "nacks",
            "packetsSent", "allReduces"))
        extra += " backend=%s" % stats.get("backend", "-")
    if rank == 0:
        print("BENCH mode=%s compute=%s ranks=%d params=%d bucket_mb=%g batch=%d image=%d step_ms_p50=%.1f "
              "steps_per_s=%.3f compute_ms_p50=%.1f exposed_comm_ms=%.1f%s%s%s" % (
                  args.mode, args.compute, world, params, args.bucket_mb, args.batch, args.image, step_s * 1e3,
                  1 / step_s, compute_s * 1e3, (step_s - compute_s) * 1e3, cpu_text, profile_text, extra),
              flush=True)
    dist.destroy_process_group()
    # torch 1.13 can deadlock at interpreter exit when DDP's Reducer releases the Gloo process group (main thread in
    # ~ProcessGroupGloo waiting on a mutex, a Gloo thread waiting for the GIL; seen in about 1 of 10 Gloo cells):
    # everything is printed and the process group is destroyed (the switchml agent stopped), so skip the teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
