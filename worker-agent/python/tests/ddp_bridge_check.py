"""End-to-end check of the switchml bridge against Gloo: one rank of a multi-process job.

Start one process per rank, each next to its own running ``switchml worker serve`` agent::

    /usr/bin/python3 ddp_bridge_check.py --rank R --world 4 --socket AGENT_R.sock --init file:///tmp/gloo-init

(PyTorchBridgeTest does this for 4 ranks.) Every rank:

(a) all-reduces seeded tensors of several sizes (1 element up to more than the agent's shared
    memory, magnitudes spread over 8 decades by region) through ``Client.all_reduce`` (sum and
    average) and through ``ddp_comm_hook``, and compares each element with Gloo's all_reduce of the
    same tensors within the bound below;
(b) trains the same MLP on the same seeded synthetic classification task with DDP twice, once with
    Gloo's all-reduce and once with the switchml hook, and evaluates test accuracy;
(c) times every training step of both runs.

Bound used in (a), per element, for n ranks: the block exponent m of the element's chunk (k
elements, counted from the start of each request piece) is the smallest integer with |x| < 2^m
over the chunk on every rank (at least -126), exactly what the worker computes. SwitchML's sum is
then within n/f = n^2 * 2^m / (2^31 - 1) of the exact sum (README, Theorem 1). The reference is
not exact either: Gloo sums n float32 values with n-1 roundings (each at most 2^-24 * sum_r |x_r|),
and switchml's result is rounded to float32 once more (at most 2^-24 * sum_r |x_r|), so rounding
is at most n * 2^-24 * sum_r |x_r|; the tolerance allows twice that. Per element it is therefore
n^2 * 2^m / (2^31 - 1) + n * 2^-23 * sum_r |x_r| (for n = 4: about 2^-27 * 2^m + 2^-21 * sum_r |x_r|),
divided by n for ``average``.

Rank 0 prints ``BRIDGE ...`` lines: ``BRIDGE CHECK``, ``BRIDGE LOSS``, ``BRIDGE RESULT``. Exit code
0 when every check of this rank passed, 1 otherwise (the reason is printed as ``BRIDGE FAIL``).
"""

import argparse
import datetime
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import switchml  # noqa: E402

FEATURES = 16
CLASSES = 4
TRAIN_SAMPLES = 8192
TEST_SAMPLES = 4096


def log(rank, line):
    if rank == 0:
        print(line, flush=True)


class FakeBucket:
    """Stands in for GradBucket to call the hook directly: only buffer() is used."""

    def __init__(self, tensor):
        self._tensor = tensor

    def buffer(self):
        return self._tensor


def quantization_bound(x, client, world):
    """Per-element bound on |switchml sum - exact sum| (float64), see the module docstring."""
    k = client.lanes
    piece = client.piece_elements
    bound = torch.empty(x.numel(), dtype=torch.float64)
    for start in range(0, x.numel(), piece):
        part = x[start:start + piece].abs()
        chunks = (part.numel() + k - 1) // k
        padded = torch.zeros(chunks * k, dtype=torch.float32)
        padded[:part.numel()] = part
        max_abs = padded.view(chunks, k).max(dim=1).values
        dist.all_reduce(max_abs, op=dist.ReduceOp.MAX)
        _, exponent = torch.frexp(max_abs)  # max_abs < 2^exponent, >= 2^(exponent-1)
        exponent = exponent.clamp(min=-126).to(torch.float64)
        per_chunk = world * world * torch.pow(2.0, exponent) / (2 ** 31 - 1)
        bound[start:start + part.numel()] = per_chunk.repeat_interleave(k)[:part.numel()]
    return bound


def check_all_reduce(rank, world, client):
    """(a): switchml all_reduce and hook against Gloo. Returns (ok, worst error/tolerance, messages)."""
    k = client.lanes
    sizes = [1, 7, k - 1, k, k + 1, 3 * k + 5, 50_000, 2 * client.piece_elements + 1234]
    worst = 0.0
    failures = []
    for case, n in enumerate(sizes):
        g = torch.Generator().manual_seed(1000 * case + rank)
        x = torch.randn(n, generator=g)
        region = 777
        scales = torch.pow(10.0, torch.rand((n + region - 1) // region, generator=g) * 8 - 4)
        x *= scales.repeat_interleave(region)[:n]
        x[::97] = 0.0
        reference = x.clone()
        dist.all_reduce(reference)
        magnitude = x.abs().to(torch.float64)
        dist.all_reduce(magnitude)
        quant = quantization_bound(x, client, world)
        rounding = magnitude * world * 2.0 ** -23
        exact = reference.to(torch.float64)
        for how in ("sum", "average", "hook"):
            y = x.clone()
            if how == "hook":
                y = switchml.ddp_comm_hook(client, FakeBucket(y)).wait()
            else:
                client.all_reduce(y, op=how)
            divisor = 1 if how == "sum" else world
            tolerance = (quant + rounding) / divisor + 1e-45
            error = (y.to(torch.float64) - exact / divisor).abs()
            ratio = (error / tolerance).max().item()
            worst = max(worst, ratio)
            if ratio > 1.0:
                at = int((error / tolerance).argmax())
                failures.append("n=%d %s: element %d is %.9g, gloo says %.9g, error %.3g > tolerance %.3g"
                                % (n, how, at, y[at].item(), (exact[at] / divisor).item(), error[at].item(),
                                   tolerance[at].item()))
    return not failures, worst, failures, sizes


def make_data(seed):
    """Seeded synthetic 4-class task: labels of Gaussian inputs from a random tanh teacher network."""
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(FEATURES, 32, generator=g)
    w2 = torch.randn(32, CLASSES, generator=g)
    x = torch.randn(TRAIN_SAMPLES + TEST_SAMPLES, FEATURES, generator=g)
    y = (torch.tanh(x @ w1 / math.sqrt(FEATURES)) @ w2).argmax(dim=1)
    return x[:TRAIN_SAMPLES], y[:TRAIN_SAMPLES], x[TRAIN_SAMPLES:], y[TRAIN_SAMPLES:]


def make_model():
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, CLASSES))


def train(rank, world, data, args, client):
    """(b) and (c): DDP training with Gloo's all-reduce (client None) or the switchml hook."""
    x_train, y_train, x_test, y_test = data
    torch.manual_seed(args.seed)
    model = make_model()
    ddp = DistributedDataParallel(model)
    if client is not None:
        ddp.register_comm_hook(client, switchml.ddp_comm_hook)
    steps_per_epoch = TRAIN_SAMPLES // (args.batch * world)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * steps_per_epoch)
    step_s = []
    losses = []
    accuracies = []
    for epoch in range(args.epochs):
        order = torch.randperm(TRAIN_SAMPLES, generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
        shard = order[rank::world]
        total = 0.0
        for step in range(steps_per_epoch):
            index = shard[step * args.batch:(step + 1) * args.batch]
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x_train[index]), y_train[index])
            loss.backward()
            optimizer.step()
            schedule.step()
            step_s.append(time.perf_counter() - start)
            total += loss.item()
        epoch_loss = torch.tensor([total / steps_per_epoch], dtype=torch.float64)
        dist.all_reduce(epoch_loss)
        losses.append(epoch_loss.item() / world)
        with torch.no_grad():
            accuracies.append((model(x_test).argmax(dim=1) == y_test).double().mean().item() * 100)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    rank0 = flat.clone()
    dist.broadcast(rank0, src=0)
    in_sync = bool(torch.equal(flat, rank0))
    timed = step_s[args.warmup_steps:]
    return {
        "losses": losses,
        "accuracies": accuracies,
        "accuracy": accuracies[-1],
        "steps": len(step_s),
        "step_ms": statistics.mean(timed) * 1e3,
        "step_ms_p50": statistics.median(timed) * 1e3,
        "in_sync": in_sync,
        "parameters": flat.numel(),
        "flat": flat,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--socket", required=True, help="this rank's agent socket (switchml worker serve --socket)")
    parser.add_argument("--init", required=True, help="torch.distributed init_method, e.g. file:///tmp/x")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-seed", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--warmup-steps", type=int, default=5, help="steps left out of the timing")
    parser.add_argument("--max-accuracy-gap", type=float, default=0.5, help="points")
    args = parser.parse_args()
    rank, world = args.rank, args.world

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=args.init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    client = switchml.Client(args.socket)
    if (client.rank, client.world_size) != (rank, world):
        raise SystemExit("BRIDGE FAIL rank=%d agent at %s serves rank %d of %d"
                         % (rank, args.socket, client.rank, client.world_size))
    failures = []

    started = time.perf_counter()
    ok, worst, messages, sizes = check_all_reduce(rank, world, client)
    failures += messages
    log(rank, "BRIDGE CHECK allreduce ok=%s sizes=%s worst_error_over_tolerance=%.3g seconds=%.1f"
        % (str(ok).lower(), ",".join(map(str, sizes)), worst, time.perf_counter() - started))

    data = make_data(args.data_seed)
    requests_before, agent_us_before = client.requests, client.agent_us
    gloo = train(rank, world, data, args, None)
    sml = train(rank, world, data, args, client)
    agent_ms = (client.agent_us - agent_us_before) / 1e3 / max(1, client.requests - requests_before)

    for name, run in (("gloo", gloo), ("switchml", sml)):
        for epoch, (loss, accuracy) in enumerate(zip(run["losses"], run["accuracies"]), start=1):
            log(rank, "BRIDGE LOSS run=%s epoch=%d train_loss=%.9f test_acc=%.2f" % (name, epoch, loss, accuracy))
        if not run["in_sync"]:
            failures.append("%s run: parameters differ between ranks after training" % name)
    gap = abs(gloo["accuracy"] - sml["accuracy"])
    drift = (gloo["flat"] - sml["flat"]).abs().max().item()
    if gap > args.max_accuracy_gap:
        failures.append("test accuracy gloo %.2f vs switchml %.2f differs by %.2f points > %.2f"
                        % (gloo["accuracy"], sml["accuracy"], gap, args.max_accuracy_gap))
    log(rank, ("BRIDGE RESULT gloo_acc=%.2f switchml_acc=%.2f acc_gap=%.2f gloo_final_loss=%.9f switchml_final_loss=%.9f "
               "gloo_step_ms=%.3f switchml_step_ms=%.3f gloo_step_ms_p50=%.3f switchml_step_ms_p50=%.3f "
               "switchml_agent_ms_per_allreduce=%.3f steps=%d params=%d param_max_abs_diff=%.3g allreduce_ok=%s params_in_sync=%s")
        % (gloo["accuracy"], sml["accuracy"], gap, gloo["losses"][-1], sml["losses"][-1],
           gloo["step_ms"], sml["step_ms"], gloo["step_ms_p50"], sml["step_ms_p50"], agent_ms,
           sml["steps"], sml["parameters"], drift, str(ok).lower(), str(gloo["in_sync"] and sml["in_sync"]).lower()))

    client.close()
    dist.destroy_process_group()
    for failure in failures:
        print("BRIDGE FAIL rank=%d %s" % (rank, failure), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
