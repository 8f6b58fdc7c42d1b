#!/usr/bin/python3
"""One rank of a SwitchML all-reduce benchmark through a host agent (`switchml worker host`), as a training process
uses it: the same float32 tensors, fill, barrier, timing and check as gloo_allreduce.py.

The rank opens its session in the host agent (OPEN: the agent joins the job), keeps its tensor in the session's
shared memory (Client.shared_tensor: all-reduced in place, no staging copy, as Gloo reduces the tensor in place), and
each round: fills the tensor, meets the other ranks (a one-element all-reduce), times client.all_reduce(tensor) from
the call to its return (TAT), then checks every element outside the timed region. Warm-up rounds are not timed.
Prints one JSON object with the keys of `switchml worker bench --json` that bench/rack/aggregate.py reads, the
packet counters from the session's STATS.

With --local-world N the ranks are N ranks of one node (torchrun's LOCAL_WORLD_SIZE): the agent sums them and sends the
sum to the appliance as one worker, so their sessions share one worker's packet counters, which local rank 0 alone
reports (the others report none, so that the cell's totals count each packet once). Needs Debian's python3-torch: run it with /usr/bin/python3.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker-agent", "python"))
from switchml.client import Client, SwitchMLError  # noqa: E402 - after the path
from tat import peer_tensors, percentile  # noqa: E402 - beside this script


PER_CALL_COUNTERS = ("retransmissions", "probes", "spuriousProbes", "pendings", "packetsSent")


def stat_fields(path):
    """A /proc stat file's command name and the fields after it (state first); OSError or ValueError if unreadable."""
    with open(path) as f:
        text = f.read()
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 1:].split()


def proc_stat(pid):
    """The agent's minor faults, major faults, user and system clock ticks (/proc/PID/stat), or None."""
    try:
        fields = stat_fields(f"/proc/{pid}/stat")[1]
        return [int(fields[7]), int(fields[9]), int(fields[11]), int(fields[12])]
    except (OSError, TypeError, IndexError, ValueError):
        return None


def thread_ticks(pid):
    """The agent's threads' user + system clock ticks by thread id and name (/proc/PID/task/*/stat)."""
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                name, fields = stat_fields(f"/proc/{pid}/task/{tid}/stat")
                out[tid] = (name, int(fields[11]) + int(fields[12]))
            except (OSError, ValueError):
                pass
    except (OSError, TypeError):
        pass
    return out


def thread_ticks_delta(before, after):
    """The threads that ran between two thread_ticks readings: name -> ticks."""
    moved = {}
    for tid, (name, ticks) in (after or {}).items():
        delta = ticks - (before or {}).get(tid, (name, 0))[1]
        if delta:
            moved[f"{name}/{tid}"] = delta
    return moved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host-agent", required=True, help="the host agent's socket")
    parser.add_argument("--job", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--appliance", required=True, help="HOST:PORT of the appliance's control endpoint")
    parser.add_argument("--elements", type=int, required=True)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("-k", type=int, required=True)
    parser.add_argument("-s", type=int, required=True)
    parser.add_argument("--mac", choices=("on", "off"), default="on")
    parser.add_argument("--local-world", type=int, default=1,
                        help="ranks of the job on this host, summed in the agent (1: one worker per rank)")
    parser.add_argument("--system", default="switchml-host", help="the system name the JSON reports")
    parser.add_argument("--agent-pid", type=int,
                        help="the host agent's process id: its CPU clock is read around each timed call, for its share "
                             "of the CPU in the timed calls (bench/rack/aggregate.py)")
    parser.add_argument("--appliance-pid", type=int,
                        help="the appliance JVM's process id: with SWITCHML_BENCH_PER_CALL=1, rank 0 reports its threads' "
                             "CPU per call")
    args = parser.parse_args()
    if args.local_world < 1 or args.world % args.local_world:
        parser.error("--local-world must be 1 or more and divide --world")

    shm_bytes = (args.elements + 2 * args.k) * 4
    client = Client(args.host_agent, timeout=120,
                    open_fields={"job": args.job, "rank": args.rank, "world": args.world, "token": args.token,
                                 "appliance": args.appliance, "k": args.k, "s": args.s, "mac": args.mac,
                                 "shmBytes": shm_bytes - shm_bytes % 4,
                                 **({"localRank": args.rank % args.local_world, "localWorld": args.local_world}
                                    if args.local_world > 1 else {})})
    tensor = client.shared_tensor(args.elements)
    meet = torch.zeros(1, dtype=torch.float32)
    mine, expected = peer_tensors(args.elements, args.rank, args.world)
    samples_ms = []
    first_ms = None
    error = None
    before = None
    # The agent's CPU clock (Linux's process CPU clock id for another pid, as glibc's clock_getcpuclockid makes it): every
    # thread of the agent, in nanoseconds, like this process's time.process_time_ns(). Read before and after each timed
    # call; bench/rack/aggregate.py takes, round by round, the span from the first rank's start to the last rank's end
    # over the ranks sharing the agent, so that agent CPU spent while only some of them were in their calls counts.
    agent_clock = ((~args.agent_pid) << 3) | 2 if args.agent_pid else None

    def agent_cpu_ns():
        try:
            return time.clock_gettime_ns(agent_clock) if agent_clock is not None else None
        except OSError:
            return None  # the agent is gone: the call fails too, and no CPU figure is reported

    # SWITCHML_BENCH_PER_CALL=1: each call's TAT, the barrier's before it and the agent's counters moved by it, one JSON
    # line per call on stderr (rank*.err in the cell's directory), to take a first call apart
    per_call = os.environ.get("SWITCHML_BENCH_PER_CALL") == "1"
    last_stats = client.stats() if per_call else None
    timed_cpu_ns = 0
    agent_marks = []
    try:
        for round_ in range(args.warmups + args.iterations):
            tensor.copy_(mine)
            barrier_ns = time.perf_counter_ns()
            client.all_reduce(meet)
            barrier_ns = time.perf_counter_ns() - barrier_ns
            if round_ == args.warmups:
                before = client.stats()
            cpu_start = time.process_time_ns()
            agent_start = agent_cpu_ns()
            call_proc = proc_stat(args.agent_pid) if per_call else None
            call_threads = thread_ticks(args.agent_pid) if per_call and args.rank == 0 else None
            call_ap_threads = thread_ticks(args.appliance_pid) if per_call and args.rank == 0 else None
            start = time.perf_counter_ns()
            client.all_reduce(tensor)
            elapsed = time.perf_counter_ns() - start
            agent_end = agent_cpu_ns()
            cpu = time.process_time_ns() - cpu_start
            if first_ms is None:
                first_ms = elapsed / 1e6
            if per_call:
                now_stats = client.stats()
                now_proc = proc_stat(args.agent_pid)
                print(json.dumps({"round": round_, "ms": elapsed / 1e6, "barrier_ms": barrier_ns / 1e6, "start_ns": start,
                                  "agent_cpu_ms": (agent_end - agent_start) / 1e6 if agent_start and agent_end else None,
                                  "call_proc": [b - a for a, b in zip(call_proc, now_proc)] if call_proc else None,
                                  "threads": thread_ticks_delta(call_threads, thread_ticks(args.agent_pid))
                                  if args.rank == 0 else None,
                                  "appliance_threads": thread_ticks_delta(call_ap_threads, thread_ticks(args.appliance_pid))
                                  if args.rank == 0 else None,
                                  **{k: now_stats[k] - (last_stats or {}).get(k, 0) for k in PER_CALL_COUNTERS},
                                  "srtt_ms": now_stats["smoothedRttNs"] / 1e6}), file=sys.stderr, flush=True)
                last_stats = now_stats
            if error is None and not torch.equal(tensor, expected):
                bad = int((tensor != expected).nonzero()[0])
                error = (f"rank {args.rank} round {round_}: element {bad} is {float(tensor[bad])}, "
                         f"expected {float(expected[bad])}")
            if round_ >= args.warmups:
                samples_ms.append(elapsed / 1e6)
                timed_cpu_ns += cpu
                agent_marks.append([agent_start, agent_end])
        after = client.stats()
        if args.rank % args.local_world:
            after = before = None  # the node's counters are local rank 0's to report
    except SwitchMLError as ex:
        error = f"rank {args.rank}: {ex}"
        after = before = None
    finally:
        client.close()
    ordered = sorted(samples_ms)
    timed = (after["retransmissions"] - before["retransmissions"]) if after and before else None
    print(json.dumps({
        "system": args.system, "ok": error is None, "error": error, "samples": len(samples_ms),
        "tat_p50_ms": percentile(ordered, 50), "tat_p99_ms": percentile(ordered, 99),
        "tat_max_ms": ordered[-1] if ordered else float("nan"), "tat_ms": samples_ms,
        "retransmissions": timed,
        "retransmissions_total": after["retransmissions"] if after else None,
        "probes_total": after["probes"] if after else None,
        "spurious_probes_total": after["spuriousProbes"] if after else None,
        "spurious_retransmissions_total": after["spuriousRetransmissions"] if after else None,
        "pendings_total": after["pendings"] if after else None,
        "packets_sent": after["packetsSent"] if after else None,
        "ranks": [{"rank": args.rank, "first_tat_ms": first_ms,
                   "smoothed_rtt_ms": after["smoothedRttNs"] / 1e6 if after else None,
                   "timed_own_cpu_sec": timed_cpu_ns / 1e9, "agent_pid": args.agent_pid,
                   "agent_cpu_marks_ns": (agent_marks if agent_marks and None not in sum(agent_marks, [])
                                          else None)}],
        "torch": torch.__version__}), flush=True)
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
