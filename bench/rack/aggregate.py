#!/usr/bin/env python3
"""Aggregate the cells of a bench/rack run into results-<date>.json, results-<date>.md and chart-<date>.svg.

    aggregate.py --cells WORK/cells --out docs/bench [--tag quick] [run metadata options]
    aggregate.py --summarise-cell WORK/cells/NNN-...   one line per cell while the run goes on

Definitions (also written into the Markdown):
  TAT        time of one all-reduce on one rank, from the call to its return, after a barrier; a cell's p50/p99
             is the slowest rank's p50/p99 over the timed all-reduces (warm-ups excluded).
  elements/s tensor elements / TAT p50 (aggregated tensor elements per second, the SwitchML paper's ATE/s).
  goodput    tensor bytes * 8 / TAT p50 / worker link rate: the fraction of one worker link's line rate (each
             direction) that the all-reduce delivers as tensor. SwitchML's ideal is 1 less header overhead
             (each worker sends and receives |U| once); a ring all-reduce's ideal is n / (2(n-1)) = 0.67 at n=4.
Standard library only.
"""
import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import subprocess
import sys

SYSTEMS = ["switchml", "switchml-host", "switchml-node", "gloo", "mpi"]
SYSTEM_LABEL = {"switchml": "SwitchML", "switchml-host": "SwitchML, host agent",
                "switchml-node": "SwitchML, host agent summing the node's ranks", "gloo": "Gloo", "mpi": "OpenMPI"}
SYSTEM_COLOUR = {"switchml": "#1f77b4", "switchml-host": "#17becf", "switchml-node": "#9467bd", "gloo": "#ff7f0e",
                 "mpi": "#2ca02c"}
# SwitchML's systems: one agent JVM per rank (`switchml worker bench`), or Python ranks served by one host agent
SWITCHML = ("switchml", "switchml-host", "switchml-node")
# corelat.c's cache-line round trip between CPUs 0 and 1 above which the two share no cache. This project's 2-vCPU
# machines measured about 26 ns (SMT siblings), 61 ns (one last-level cache) and 290-320 ns (none), switching
# between them for seconds at a time.
CORES_APART_NS = 150
# a round counts as "CPUs together" when no sample found them apart (a sample is the fastest of 20 batches of round
# trips, so one apart is a real stretch of placement, not a preempted thread; a busy cell skips about half its samples)
TOGETHER_AT_MOST = 0.0


# ----------------------------------------------------------------------------------------------------------------
# Reading cells

def read_meta(cell_dir):
    meta = {}
    with open(os.path.join(cell_dir, "meta.txt")) as f:
        for line in f:
            if "=" not in line:
                continue
            key, value = line.rstrip("\n").split("=", 1)
            meta[key] = number(value)
    return meta


def number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_json(path):
    """The last JSON object line of a file, or None."""
    try:
        with open(path) as f:
            lines = [line for line in f.read().splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def tail(path, lines=3):
    try:
        with open(path) as f:
            return " | ".join(line.strip() for line in f.read().splitlines()[-lines:] if line.strip())
    except OSError:
        return ""


def cpu_seconds(path):
    data = read_json(path)
    return (data["userSec"] + data["systemSec"]) if data else 0.0


def cpu_split(paths):
    """(user, system, max RSS KiB) summed / maxed over cpuwrap files."""
    user = system = 0.0
    rss = None
    for path in paths:
        data = read_json(path)
        if data:
            user += data["userSec"]
            system += data["systemSec"]
            if isinstance(data.get("maxRssKiB"), (int, float)):
                rss = max(rss or 0, data["maxRssKiB"])
    return user, system, rss


def add_agent_shares(ranks):
    """The host agents' CPU in the timed calls, for ranks served by one (switchml_host_allreduce.py): per agent and
    round, its CPU clock from the first of its ranks to start the call to the last to return it, summed over the rounds
    and shared equally among its ranks; added to each rank's own CPU as its timedCpuSec. Ranks no agent serves keep
    what they reported."""
    served = [r for r in ranks if r.get("agentPid") is not None]
    if not served:
        return
    if any(not r.get("agentCpuMarksNs") or r.get("timedOwnCpuSec") is None for r in served):
        for r in served:
            r["timedCpuSec"] = None  # an agent's clock could not be read: no figure rather than a low one
        return
    by_agent = {}
    for r in served:
        by_agent.setdefault(r["agentPid"], []).append(r)
    for group in by_agent.values():
        rounds = min(len(r["agentCpuMarksNs"]) for r in group)
        agent_ns = sum(max(r["agentCpuMarksNs"][i][1] for r in group) - min(r["agentCpuMarksNs"][i][0] for r in group)
                       for i in range(rounds))
        for r in group:
            r["timedCpuSec"] = r["timedOwnCpuSec"] + agent_ns / len(group) / 1e9


def load_cell(cell_dir):
    meta = read_meta(cell_dir)
    system = meta["system"]
    workers = int(meta["workers"])
    ranks = []
    errors = []
    retransmissions = None
    recovery = {"resends": 0, "probes": 0, "pendings": 0, "spuriousProbes": 0, "spuriousResends": 0, "sent": 0}
    if system in SWITCHML + ("gloo",):
        for r in range(workers):
            data = read_json(os.path.join(cell_dir, f"rank{r}.json"))
            if data is None:
                errors.append(f"rank {r}: no result ({tail(os.path.join(cell_dir, f'rank{r}.err'))})")
                continue
            if not data.get("ok"):
                errors.append(f"rank {r}: {data.get('error')}")
            if system in SWITCHML:
                rank = data["ranks"][0] if data.get("ranks") else {}
                # `switchml worker bench --json` writes snake_case keys; this file's cells keep their camelCase.
                ranks.append({"rank": r, "ok": data.get("ok"), "tatP50Ms": data.get("tat_p50_ms"),
                              "tatP99Ms": data.get("tat_p99_ms"), "tatMaxMs": data.get("tat_max_ms"),
                              "samples": data.get("samples"), "retransmissions": data.get("retransmissions"),
                              "smoothedRttMs": rank.get("smoothed_rtt_ms"), "firstTatMs": rank.get("first_tat_ms"),
                              "timedCpuSec": rank.get("timed_cpu_sec"), "timedOwnCpuSec": rank.get("timed_own_cpu_sec"),
                              "agentPid": rank.get("agent_pid"), "agentCpuMarksNs": rank.get("agent_cpu_marks_ns")})
                retransmissions = (retransmissions or 0) + (data.get("retransmissions") or 0)
                recovery["resends"] += data.get("retransmissions_total") or 0
                recovery["probes"] += data.get("probes_total") or 0
                recovery["spuriousProbes"] += data.get("spurious_probes_total") or 0
                recovery["pendings"] += data.get("pendings_total") or 0
                recovery["spuriousResends"] += data.get("spurious_retransmissions_total") or 0
                recovery["sent"] += data.get("packets_sent") or 0
            else:
                ranks.append({k: data.get(k) for k in ("rank", "ok", "tatP50Ms", "tatP99Ms", "tatMaxMs", "samples",
                                                       "firstTatMs", "timedCpuSec")})
                ranks[-1]["tatMs"] = data.get("tatMs")
    else:
        data = read_json(os.path.join(cell_dir, "mpi.json"))
        if data is None:
            errors.append(f"no result ({tail(os.path.join(cell_dir, 'mpi.err'))})")
        else:
            for rank in data["ranks"]:
                if not rank.get("ok"):
                    errors.append(f"rank {rank['rank']}: {rank.get('error')}")
                ranks.append({k: rank.get(k) for k in ("rank", "ok", "tatP50Ms", "tatP99Ms", "tatMaxMs", "samples", "tatMs",
                                                       "firstTatMs", "timedCpuSec")})
            meta["library"] = (data.get("library") or "").replace("\x00", "").strip()
    if meta.get("exitStatus", 0) not in (0, "0") and not errors:
        errors.append(f"exit status {meta.get('exitStatus')}")
    ok = not errors and len(ranks) == workers and all(r.get("tatP50Ms") is not None for r in ranks)
    cell = dict(meta)
    for field in ("cpuBusyFraction", "wireBytes", "tcpRetransSegs", "udpRcvbufErrors", "udpSndbufErrors", "lossDrops",
                  "qdiscDrops", "backlogDrops", "loadAvgBefore", "loadAvgAfter", "wallSec"):
        if not isinstance(cell.get(field), (int, float)):
            cell[field] = None
    cell["udpBufferDrops"] = ((cell["udpRcvbufErrors"] or 0) + (cell["udpSndbufErrors"] or 0)
                              if cell["udpRcvbufErrors"] is not None else None)
    cell["cell"] = os.path.basename(cell_dir)
    cell["ok"] = ok
    cell["error"] = "; ".join(errors) if errors else None
    cell["ranks"] = ranks
    rounds = int(meta["iterations"]) + int(meta["warmups"])
    if ok:
        p50 = max(r["tatP50Ms"] for r in ranks)
        p99 = max(r["tatP99Ms"] for r in ranks)
        cell["tatP50Ms"] = round(p50, 3)
        cell["tatP99Ms"] = round(p99, 3)
        firsts = [r.get("firstTatMs") for r in ranks]
        cell["firstTatMs"] = round(max(firsts), 3) if all(isinstance(f, (int, float)) for f in firsts) else None
        cell["elementsPerSec"] = meta["elements"] / (p50 / 1e3)
        cell["tensorGbitPerSec"] = meta["sizeBytes"] * 8 / (p50 / 1e3) / 1e9
        rate = meta.get("rateBitsPerSec") or 0
        cell["goodput"] = (meta["sizeBytes"] * 8 / (p50 / 1e3) / rate) if rate and meta["mode"] == "rack" else None
    if system in SWITCHML:
        cell["retransmissions"] = retransmissions
        cell["retransmissionsUnit"] = "SwitchML packets, timed all-reduces, all ranks"
        cell["retransmissionsPerAllReduce"] = (retransmissions / int(meta["iterations"])) if retransmissions is not None else None
    else:
        cell["retransmissions"] = cell.get("tcpRetransSegs")
        cell["retransmissionsUnit"] = ("TCP segments, whole cell, worker namespaces" if meta["mode"] == "rack"
                                       else "TCP segments, whole cell, whole host (includes other traffic)")
        cell["retransmissionsPerAllReduce"] = ((cell["tcpRetransSegs"] or 0) / rounds) if rounds else None
    wire = cell.get("wireBytes") or 0
    cell["wireBytesPerWorkerPerAllReduce"] = (wire / workers / rounds) if wire and meta["mode"] == "rack" else None
    cpu_workers = sum(cpu_seconds(p) for p in glob.glob(os.path.join(cell_dir, "rank*.cpu.json")))
    cpu_workers += cpu_seconds(os.path.join(cell_dir, "mpi.cpu.json"))
    cell["cpuSecWorkers"] = round(cpu_workers, 2)
    rank_files = glob.glob(os.path.join(cell_dir, "rank*.cpu.json")) or [os.path.join(cell_dir, "mpi.cpu.json")]
    user, sys_, rss = cpu_split(rank_files)
    tensor_gb = meta["sizeBytes"] * rounds / 1e9
    cell["cpuUserSecPerRank"] = round(user / workers, 3)
    cell["cpuSysSecPerRank"] = round(sys_ / workers, 3)
    cell["cpuSecPerRankPerGB"] = round((user + sys_) / workers / tensor_gb, 3) if tensor_gb else None
    cell["maxRssMiB"] = round(rss / 1024, 1) if rss else None
    # CPU in the timed calls alone: each rank's process (and its host agent's share) from the call to its return
    add_agent_shares(ranks)
    timed = [r.get("timedCpuSec") for r in ranks]
    timed_gb = meta["sizeBytes"] * int(meta["iterations"]) / 1e9
    cell["timedCpuSecPerRankPerGB"] = (round(sum(timed) / workers / timed_gb, 3)
                                       if ok and timed_gb and all(isinstance(t, (int, float)) for t in timed) else None)
    if system in SWITCHML and recovery["sent"]:
        cell["recovery"] = recovery
        cell["resendsAndProbesPerMille"] = round((recovery["resends"] + recovery["probes"]) * 1000 / recovery["sent"], 3)
    else:
        cell["resendsAndProbesPerMille"] = None
    if cell.get("firstTatMs") and cell.get("tatP50Ms"):
        cell["firstCallVsSteady"] = round(cell["firstTatMs"] / cell["tatP50Ms"], 2)
    cell["cpuSecAppliance"] = round(cpu_seconds(os.path.join(cell_dir, "appliance.cpu.json")), 2) if system in SWITCHML else None
    # the appliance's CPU from its "ready" to the ranks' end (start-up and rehearsal not in it): on loopback it runs on
    # the ranks' cores, so the host pays it beside theirs
    job = read_json(os.path.join(cell_dir, "appliance.job.cpu.json")) if system in SWITCHML else None
    cell["cpuSecApplianceJob"] = round(job["userSec"] + job["systemSec"], 2) if job else None
    cell["applianceCpuSecPerGB"] = (round(cell["cpuSecApplianceJob"] / tensor_gb, 3)
                                    if cell["cpuSecApplianceJob"] is not None and tensor_gb else None)
    # per rank per GB: the ranks' CPU in the timed calls plus a rank's share of the appliance's over the job
    timed_rank = cell["timedCpuSecPerRankPerGB"]
    if system not in SWITCHML:
        cell["hostCpuSecPerRankPerGB"] = timed_rank
    elif cell["applianceCpuSecPerGB"] is not None and timed_rank is not None:
        cell["hostCpuSecPerRankPerGB"] = round(timed_rank + cell["applianceCpuSecPerGB"] / workers, 3)
    else:
        cell["hostCpuSecPerRankPerGB"] = None
    add_core_placement(cell, cell_dir)
    return cell


def core_round_trips(cell_dir):
    """corelat.txt's samples: (valid round trips in ns, samples taken); None when the cell has no such file."""
    try:
        with open(os.path.join(cell_dir, "corelat.txt")) as f:
            values = [int(line.split()[1]) for line in f if len(line.split()) == 2]
    except (OSError, ValueError):
        return None
    return [v for v in values if v > 0], len(values)


def add_core_placement(cell, cell_dir):
    samples = core_round_trips(cell_dir)
    if samples is None or not samples[0]:
        cell["coresApartFraction"] = None
        cell["coreRoundTripNsP50"] = None
        cell["coreSamples"] = samples[1] if samples else None
        return
    valid, taken = samples
    valid.sort()
    cell["coresApartFraction"] = round(sum(1 for v in valid if v > CORES_APART_NS) / len(valid), 3)
    cell["coreRoundTripNsP50"] = valid[len(valid) // 2]
    cell["coreSamples"] = taken
    cell["coreSamplesValid"] = len(valid)


def summary_line(cell):
    where = f"{cell['mode']} rate={cell['rate']} loss={cell['loss']} {cell['sizeBytes'] / 1e6:g}MB"
    if not cell["ok"]:
        return f"  -> {cell['system']:8s} {where}: FAILED {cell['error']}"
    good = f", goodput {cell['goodput']:.3f} of line rate" if cell.get("goodput") is not None else ""
    return (f"  -> {cell['system']:8s} {where}: TAT p50 {cell['tatP50Ms']:.2f} ms p99 {cell['tatP99Ms']:.2f} ms, "
            f"{cell['elementsPerSec']:.4g} elements/s{good}, retransmissions {cell['retransmissions']}, "
            f"UDP buffer drops {cell.get('udpBufferDrops')}, CPU busy {(cell.get('cpuBusyFraction') or 0) * 100:.0f}%, "
            f"CPUs apart {apart_label(cell.get('coresApartFraction'))}")


# ----------------------------------------------------------------------------------------------------------------
# Comparisons and targets

def key(cell):
    return (cell["mode"], cell["rateBitsPerSec"], cell["loss"], cell["sizeBytes"])


def find(cells, system, mode, rate_bits=None, loss=0, size=None):
    for cell in cells:
        if (cell["system"] == system and cell["mode"] == mode and cell["ok"]
                and (rate_bits is None or cell["rateBitsPerSec"] == rate_bits)
                and abs(float(cell["loss"]) - loss) < 1e-12 and (size is None or cell["sizeBytes"] == size)):
            return cell
    return None


def pick_medians(cells):
    """With --repeat, keep each cell's median run by TAT p50 (a failed run counts as slowest) and record every
    run's p50 on it; the others stay in the JSON under "repeats"."""
    by = {}
    order = []
    for cell in cells:
        k = (cell["system"],) + key(cell)
        if k not in by:
            by[k] = []
            order.append(k)
        by[k].append(cell)
    chosen = []
    for k in order:
        runs = by[k]
        ranked = sorted(runs, key=lambda c: c["tatP50Ms"] if c["ok"] else float("inf"))
        pick = dict(ranked[(len(ranked) - 1) // 2])
        pick["runs"] = len(runs)
        pick["runsTatP50Ms"] = [c.get("tatP50Ms") for c in runs]
        pick["runsCoresApart"] = [c.get("coresApartFraction") for c in runs]
        pick["runsOk"] = [c["ok"] for c in runs]
        pick["runsFailed"] = sum(1 for c in runs if not c["ok"])
        chosen.append(pick)
    return chosen


def add_ratios(cells):
    by_key = {}
    for cell in cells:
        by_key.setdefault(key(cell), {})[cell["system"]] = cell
    for group in by_key.values():
        gloo = group.get("gloo")
        for cell in group.values():
            if cell["ok"] and gloo is not None and gloo["ok"]:
                cell["elementsPerSecVsGloo"] = cell["elementsPerSec"] / gloo["elementsPerSec"]
                cell["tatP50VsGloo"] = cell["tatP50Ms"] / gloo["tatP50Ms"]
            else:
                cell["elementsPerSecVsGloo"] = None
                cell["tatP50VsGloo"] = None


def targets(cells, workers):
    gbit = 1_000_000_000
    big, small = 100_000_000, 1_000_000
    out = []

    def target(name, goal, measured, met, detail, suspect=False):
        status = "not measured" if met is None else ("met" if met else "NOT MET")
        if suspect and met:
            status = "met, but suspect"
        out.append({"target": name, "goal": goal, "measured": measured, "status": status, "detail": detail})

    def timed_cpu_target(name, cell, peer, where):
        """The steady state's CPU beside the whole process's: each rank's process CPU (every thread; a host agent's
        share with its rank's) from the call to the return of the timed all-reduces, both systems measured alike."""
        if cell and peer and cell.get("timedCpuSecPerRankPerGB") and peer.get("timedCpuSecPerRankPerGB"):
            ratio = cell["timedCpuSecPerRankPerGB"] / peer["timedCpuSecPerRankPerGB"]
            target(name, "<= 1.00x", f"{ratio:.2f}x", ratio <= 1.0,
                   f"{where}: process CPU seconds (clock_gettime(CLOCK_PROCESS_CPUTIME_ID), every thread) from the "
                   f"call to the return of each timed all-reduce, per rank per GB: SwitchML "
                   f"{cell['timedCpuSecPerRankPerGB']:.2f}, Gloo {peer['timedCpuSecPerRankPerGB']:.2f}; start-up, "
                   f"warm-ups and the fill and check between calls are not in it (the whole-process line is)")
        elif cell and peer:
            target(name, "<= 1.00x", None, None, where + ": a rank reported no CPU for its timed calls")

    ours = find(cells, "switchml", "rack", gbit, 0, big)
    gloo = find(cells, "gloo", "rack", gbit, 0, big)
    scope = f"1 Gbit/s links, {workers} workers, 100 MB, loss 0"
    if workers != 4:
        scope += " (the target is stated for 4 workers)"
    if ours and gloo:
        ratio = ours["elementsPerSec"] / gloo["elementsPerSec"]
        target("elements/s vs Gloo", ">= 1.45x (ideal ~1.55x)", f"{ratio:.2f}x", ratio >= 1.45,
               f"{scope}: SwitchML {ours['elementsPerSec']:.4g}/s (TAT {ours['tatP50Ms']:.0f} ms), "
               f"Gloo {gloo['elementsPerSec']:.4g}/s (TAT {gloo['tatP50Ms']:.0f} ms)")
    else:
        target("elements/s vs Gloo", ">= 1.45x (ideal ~1.55x)", None, None, scope + ": a cell is missing or failed")
    if ours:
        target("goodput", ">= 0.95 of line rate", f"{ours['goodput']:.3f}", ours["goodput"] >= 0.95,
               f"{scope}: {ours['tensorGbitPerSec']:.3f} Gbit/s of tensor per worker each way")
    else:
        target("goodput", ">= 0.95 of line rate", None, None, scope + ": the cell is missing or failed")

    lossy = find(cells, "switchml", "rack", gbit, 0.01, big)
    if ours and lossy:
        ratio = lossy["tatP50Ms"] / ours["tatP50Ms"]
        detail = (f"1 Gbit/s, 100 MB, 1% loss per port and direction: TAT {lossy['tatP50Ms']:.0f} ms vs "
                  f"{ours['tatP50Ms']:.0f} ms loss-free; {lossy['retransmissions']} retransmissions in "
                  f"{lossy['iterations']} timed all-reduces")
        faster = [c for c in cells if c["system"] == "switchml" and c["mode"] == "rack" and c["ok"]
                  and c["rateBitsPerSec"] == gbit and c["sizeBytes"] == big and 0 < float(c["loss"]) < 0.01
                  and c["tatP50Ms"] < ours["tatP50Ms"]]
        if faster:
            low = min(faster, key=lambda c: float(c["loss"]))
            detail += (f". CAUTION: the loss-free cell was slower than the {loss_label(low['loss'])} loss cell "
                       f"({low['tatP50Ms']:.0f} ms), so the loss-free figure is noise, not a baseline; against that "
                       f"cell the ratio is {lossy['tatP50Ms'] / low['tatP50Ms']:.2f}x")
        target("TAT at 1% loss vs loss-free", "<= 1.10x", f"{ratio:.2f}x", ratio <= 1.10, detail, suspect=bool(faster))
    else:
        target("TAT at 1% loss vs loss-free", "<= 1.10x", None, None, "1 Gbit/s, 100 MB: a cell is missing or failed")

    ours_small = find(cells, "switchml", "rack", gbit, 0, small)
    gloo_small = find(cells, "gloo", "rack", gbit, 0, small)
    if ours_small and gloo_small:
        ratio = ours_small["tatP50Ms"] / gloo_small["tatP50Ms"]
        target("1 MB TAT vs Gloo", "<= 0.70x", f"{ratio:.2f}x", ratio <= 0.70,
               f"1 Gbit/s, 1 MB, loss 0: SwitchML {ours_small['tatP50Ms']:.2f} ms, Gloo {gloo_small['tatP50Ms']:.2f} ms")
    else:
        target("1 MB TAT vs Gloo", "<= 0.70x", None, None, "1 Gbit/s, 1 MB: a cell is missing or failed")

    if ours and gloo:
        ratio = ours["cpuSecPerRankPerGB"] / gloo["cpuSecPerRankPerGB"] if gloo.get("cpuSecPerRankPerGB") else None
        target("worker CPU vs Gloo", "<= 1.00x", f"{ratio:.2f}x" if ratio else None, ratio <= 1.0 if ratio else None,
               f"{scope}: CPU seconds (user + sys) per rank per GB of tensor, the whole process (JVM start and JIT, "
               f"Python and torch import included): SwitchML {ours['cpuSecPerRankPerGB']:.2f} (user "
               f"{ours['cpuUserSecPerRank']:.2f} s, sys {ours['cpuSysSecPerRank']:.2f} s per rank), Gloo "
               f"{gloo['cpuSecPerRankPerGB']:.2f} (user {gloo['cpuUserSecPerRank']:.2f} s, sys {gloo['cpuSysSecPerRank']:.2f} s)")
    else:
        target("worker CPU vs Gloo", "<= 1.00x", None, None, scope + ": a cell is missing or failed")
    timed_cpu_target("worker CPU in the timed calls vs Gloo", ours, gloo, scope)
    host_rack = find(cells, "switchml-host", "rack", gbit, 0, big)
    if host_rack and gloo and gloo.get("cpuSecPerRankPerGB"):
        how = (f"{scope}, a Python rank and a host agent per worker namespace (started and warmed up "
               f"{host_rack.get('hostWarmUpMs', '?')} ms before the cells, as the packaged unit at boot; shared memory "
               f"{host_rack.get('hostShm', '/dev/shm')})")
        ratio = host_rack["elementsPerSec"] / gloo["elementsPerSec"]
        target("elements/s vs Gloo, host agents", ">= 1.45x", f"{ratio:.2f}x", ratio >= 1.45,
               f"{how}: SwitchML TAT {host_rack['tatP50Ms']:.0f} ms, Gloo {gloo['tatP50Ms']:.0f} ms")
        ratio = host_rack["cpuSecPerRankPerGB"] / gloo["cpuSecPerRankPerGB"]
        target("worker CPU vs Gloo, host agents", "<= 1.00x", f"{ratio:.2f}x", ratio <= 1.0,
               f"{how}: CPU seconds per rank per GB, the rank's process (Python and torch import included) plus its "
               f"agent's CPU during the cell: SwitchML {host_rack['cpuSecPerRankPerGB']:.2f} (user "
               f"{host_rack['cpuUserSecPerRank']:.2f} s, sys {host_rack['cpuSysSecPerRank']:.2f} s per rank), Gloo "
               f"{gloo['cpuSecPerRankPerGB']:.2f}")
        timed_cpu_target("worker CPU in the timed calls vs Gloo, host agents", host_rack, gloo, how)
    for mode, cell in (("rack", ours), ("loopback", find(cells, "switchml", "loopback", None, 0, big))):
        name = f"resends + probes at zero loss ({mode})"
        if cell and cell.get("resendsAndProbesPerMille") is not None:
            r = cell["recovery"]
            target(name, "<= 1 per 1000 packets", f"{cell['resendsAndProbesPerMille']:.2f} per 1000",
                   cell["resendsAndProbesPerMille"] <= 1.0,
                   f"100 MB, all all-reduces of the cell, all ranks: {r['resends']} resends and {r['probes']} probes "
                   f"of {r['sent']} packets sent; answered PENDING (waiting for a peer): {r.get('pendings', 0)}; "
                   f"shown unneeded: {r['spuriousProbes']} probes, {r['spuriousResends']} resends")
        else:
            target(name, "<= 1 per 1000 packets", None, None, f"{mode}, 100 MB: the cell is missing or failed")
    if ours and ours.get("firstCallVsSteady") is not None:
        target("first all-reduce vs steady TAT", "<= 2.0x", f"{ours['firstCallVsSteady']:.2f}x",
               ours["firstCallVsSteady"] <= 2.0,
               f"{scope}: first call {ours['firstTatMs']:.0f} ms (the slowest rank's), TAT p50 {ours['tatP50Ms']:.0f} ms")
    else:
        target("first all-reduce vs steady TAT", "<= 2.0x", None, None, scope + ": the cell is missing or failed")

    ours_loop = find(cells, "switchml", "loopback", None, 0, big)
    gloo_loop = find(cells, "gloo", "loopback", None, 0, big)
    if ours_loop and gloo_loop:
        ratio = ours_loop["elementsPerSec"] / gloo_loop["elementsPerSec"]
        together = together_ratio(ours_loop, gloo_loop)
        target("loopback elements/s vs Gloo", ">= 1.00x", f"{ratio:.2f}x", ratio >= 1.0,
               f"loopback, {workers} workers, 100 MB, all on the host's cores: SwitchML TAT {ours_loop['tatP50Ms']:.0f} ms, "
               f"Gloo {gloo_loop['tatP50Ms']:.0f} ms{together_note(ours_loop, gloo_loop)}{host_cpu_note(ours_loop, gloo_loop)}",
               suspect=together is not None and together < 1.0)
        timed_cpu_target("loopback worker CPU in the timed calls vs Gloo", ours_loop, gloo_loop,
                         f"loopback, {workers} agent JVMs started for the job, 100 MB")
    else:
        target("loopback elements/s vs Gloo", ">= 1.00x", None, None, "loopback, 100 MB: a cell is missing or failed")
    if ours_loop and ours_loop.get("firstCallVsSteady") is not None:
        target("loopback first all-reduce vs steady TAT", "<= 2.0x", f"{ours_loop['firstCallVsSteady']:.2f}x",
               ours_loop["firstCallVsSteady"] <= 2.0,
               f"loopback, {workers} agent JVMs started for the job, 100 MB: first call {ours_loop['firstTatMs']:.0f} ms "
               f"(the slowest rank's), TAT p50 {ours_loop['tatP50Ms']:.0f} ms")
    for system, suffix, how in (("switchml-host", "host agent", "one worker of the job per rank"),
                                ("switchml-node", "node summed in the host agent",
                                 "the ranks as one node's, summed in the agent and sent to the appliance as one worker")):
        host_loop = find(cells, system, "loopback", None, 0, big)
        if not host_loop:
            continue
        where = (f"loopback, {workers} Python ranks served by one host agent (started and warmed up "
                 f"{host_loop.get('hostWarmUpMs', '?')} ms before the rounds; shared memory "
                 f"{host_loop.get('hostShm', '/dev/shm')}), {how}, 100 MB")
        if gloo_loop:
            ratio = host_loop["elementsPerSec"] / gloo_loop["elementsPerSec"]
            together = together_ratio(host_loop, gloo_loop)
            target(f"loopback elements/s vs Gloo, {suffix}", ">= 1.00x", f"{ratio:.2f}x", ratio >= 1.0,
                   f"{where}: SwitchML TAT {host_loop['tatP50Ms']:.0f} ms, Gloo {gloo_loop['tatP50Ms']:.0f} ms"
                   f"{together_note(host_loop, gloo_loop)}{host_cpu_note(host_loop, gloo_loop)}",
                   suspect=together is not None and together < 1.0)
            if gloo_loop.get("cpuSecPerRankPerGB") and host_loop.get("cpuSecPerRankPerGB"):
                ratio = host_loop["cpuSecPerRankPerGB"] / gloo_loop["cpuSecPerRankPerGB"]
                target(f"loopback worker CPU vs Gloo, {suffix}", "<= 1.00x", f"{ratio:.2f}x", ratio <= 1.0,
                       f"{where}: CPU seconds per rank per GB, the Python ranks plus the host agent's CPU in the cell "
                       f"shared among them: {host_loop['cpuSecPerRankPerGB']:.2f} against Gloo's "
                       f"{gloo_loop['cpuSecPerRankPerGB']:.2f}")
            timed_cpu_target(f"loopback worker CPU in the timed calls vs Gloo, {suffix}", host_loop, gloo_loop, where)
        if host_loop.get("firstCallVsSteady") is not None:
            target(f"loopback first all-reduce vs steady TAT, {suffix}", "<= 2.0x",
                   f"{host_loop['firstCallVsSteady']:.2f}x", host_loop["firstCallVsSteady"] <= 2.0,
                   f"{where}: first call {host_loop['firstTatMs']:.0f} ms (the slowest rank's), TAT p50 "
                   f"{host_loop['tatP50Ms']:.0f} ms")
        if host_loop.get("resendsAndProbesPerMille") is not None:
            target(f"resends + probes at zero loss (loopback, {suffix})", "<= 1 per 1000 packets",
                   f"{host_loop['resendsAndProbesPerMille']:.2f} per 1000", host_loop["resendsAndProbesPerMille"] <= 1.0,
                   f"{where}: {host_loop['recovery']['resends']} resends and {host_loop['recovery']['probes']} probes of "
                   f"{host_loop['recovery']['sent']} packets sent")
    return out


# ----------------------------------------------------------------------------------------------------------------
# Machine

def run(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(cells):
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
    except (OSError, StopIteration):
        pass
    debian = ""
    try:
        with open("/etc/debian_version") as f:
            debian = f.read().strip()
    except OSError:
        pass
    java = run(["bash", "-c", "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java -version 2>&1 | head -1"])
    torch = run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"])
    mpi = next((c.get("library") for c in cells if c.get("library")), None) or run(["bash", "-c", "mpirun --version 2>/dev/null | head -1"])
    return {"hostname": platform.node(), "nproc": os.cpu_count(), "cpuModel": model, "kernel": platform.release(),
            "memoryGiB": round(mem_kb / 1024 / 1024, 1), "debian": debian, "java": java, "torch": torch,
            "openmpi": mpi.strip() if mpi else None}


# ----------------------------------------------------------------------------------------------------------------
# Markdown

def fmt(value, spec, missing="–"):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return format(value, spec)


def loss_label(loss):
    loss = float(loss)
    return "0" if loss == 0 else f"{loss * 100:g}%"


def rate_label(mode, rate, bits):
    if mode == "loopback":
        return "loopback"
    return "unlimited" if not bits else rate


def group_title(mode, rate, bits, size):
    where = "plain loopback (no namespaces)" if mode == "loopback" else f"rack, worker links {rate_label(mode, rate, bits)}"
    return f"{where}, {size / 1e6:g} MB float32"


def groups(cells):
    """(mode, rate label, bits, size) in run order, each with its cells."""
    order = []
    by = {}
    for cell in cells:
        k = (cell["mode"], cell["rate"], cell["rateBitsPerSec"], cell["sizeBytes"])
        if k not in by:
            by[k] = []
            order.append(k)
        by[k].append(cell)
    return [(k, by[k]) for k in order]


def apart_label(fraction):
    return "?" if fraction is None else f"{fraction * 100:.0f}%"


def runs_note(cell):
    if cell.get("runs", 1) <= 1:
        if cell.get("coresApartFraction") is None:
            return ""
        return f"; CPUs apart {apart_label(cell['coresApartFraction'])}"
    p50s = " / ".join(fmt(v, ".0f") for v in cell["runsTatP50Ms"])
    note = f", median of {cell['runs']} runs (p50s {p50s} ms)"
    apart = cell.get("runsCoresApart") or []
    if any(a is not None for a in apart):
        note += f"; CPUs apart {' / '.join(apart_label(a) for a in apart)}"
    return note


def together_median(cell):
    """The median TAT p50 of a cell's rounds that ran with CPUs 0 and 1 sharing a cache (corelat), and their count."""
    p50s = cell.get("runsTatP50Ms") or [cell.get("tatP50Ms")]
    apart = cell.get("runsCoresApart") or [cell.get("coresApartFraction")]
    oks = cell.get("runsOk") or [cell.get("ok")]
    chosen = sorted(p for p, a, ok in zip(p50s, apart, oks)
                    if ok and isinstance(p, (int, float)) and a is not None and a <= TOGETHER_AT_MOST)
    if not chosen:
        return None, 0
    middle = len(chosen) // 2
    median = chosen[middle] if len(chosen) % 2 else (chosen[middle - 1] + chosen[middle]) / 2
    return median, len(chosen)


def together_ratio(ours, gloo):
    """Gloo's TAT over ours (the elements/s ratio) over the rounds with the CPUs together; None without such rounds."""
    a, n = together_median(ours)
    b, m = together_median(gloo)
    return b / a if n and m else None


def together_note(ours, gloo):
    """A detail for a loopback comparison: the same ratio over the rounds in which the CPUs shared a cache."""
    if ours.get("runsCoresApart") is None and ours.get("coresApartFraction") is None:
        return ""
    a, n = together_median(ours)
    b, m = together_median(gloo)
    if not n or not m:
        return (f"; rounds with CPUs 0 and 1 sharing a cache throughout (corelat): {n} of ours, {m} of Gloo's, "
                f"no ratio")
    return (f"; over the rounds with CPUs 0 and 1 sharing a cache throughout (corelat: no sample apart): "
            f"SwitchML {a:.0f} ms ({rounds(n)}), Gloo {b:.0f} ms "
            f"({rounds(m)}), {b / a:.2f}x")


def host_cpu_note(ours, gloo):
    """A detail for a loopback comparison: what the host's cores spent per GB, the appliance's share included."""
    mine, theirs = ours.get("hostCpuSecPerRankPerGB"), gloo.get("hostCpuSecPerRankPerGB")
    if mine is None or not theirs:
        return ""
    return (f"; the host's CPU per rank per GB: the ranks' in the timed calls plus a rank's share of the appliance's "
            f"on the same cores (over the job, warm-ups included, its start-up not): SwitchML {mine:.2f} "
            f"(ranks {ours['timedCpuSecPerRankPerGB']:.2f} + appliance {mine - ours['timedCpuSecPerRankPerGB']:.2f}), "
            f"Gloo {theirs:.2f}, {mine / theirs:.2f}x")


def rounds(n):
    return f"{n} round" if n == 1 else f"{n} rounds"


def markdown(report):
    cells = report["cells"]
    run_ = report["run"]
    m = report["machine"]
    lines = []
    lines.append(f"# Rack benchmark: SwitchML vs Gloo vs OpenMPI ({run_['date']})")
    lines.append("")
    lines.append(f"- **Date**: {run_['started']} to {run_['finished']} (UTC)")
    lines.append(f"- **Machine**: {m['hostname']}, {m['nproc']} cores ({m['cpuModel']}), {m['memoryGiB']} GiB, "
                 f"kernel {m['kernel']}, Debian {m['debian']}")
    lines.append(f"- **Software**: {m['java']}; PyTorch {m['torch']} (Gloo); {m['openmpi']}")
    lines.append(f"- **Build**: commit {run_['build']}"
                 f"{' plus uncommitted changes in the working tree' if run_['buildDirty'] == 'true' else ''}, "
                 f"jar built {run_.get('buildTime') or '?'}")
    lines.append(f"- **Command**: `{run_['command']}`")
    lines.append(f"- **Rack**: {run_['workers']} workers, each in its own network namespace on a bridge (the ToR) in "
                 f"another; tbf on both ends of every worker link; appliance link: "
                 f"{'unlimited' if run_['applianceRate'] == 'none' else run_['applianceRate']}; MTU {run_['mtu']}; "
                 f"loss by nftables on every bridge port in both directions (a frame crosses two lossy ports); "
                 f"veth offloads: {run_['offload']}; SwitchML MAC {run_['mac']}; SwitchML results "
                 f"{'multicast' if run_.get('multicast') == 'on' else 'unicast to each worker'}; SwitchML fast retransmission "
                 f"{run_.get('fastRetransmit', 'off')}; appliance shard threads "
                 f"{'unpinned' if run_.get('shardCpus', 'none') == 'none' else 'pinned to CPU ' + run_['shardCpus']}")
    loads = [c.get("loadAvgBefore") for c in cells if isinstance(c.get("loadAvgBefore"), (int, float))]
    busy = [c.get("cpuBusyFraction") for c in cells if isinstance(c.get("cpuBusyFraction"), (int, float))]
    if loads:
        lines.append(f"- **Noise**: the host's load average before a cell ranged {min(loads):.1f} to {max(loads):.1f} "
                     f"(the 1-minute average: it still counts the previous cell's processes, and any other work on "
                     f"the {m['nproc']} cores); CPU busy during cells "
                     f"{min(busy) * 100:.0f}% to {max(busy) * 100:.0f}%. Treat single figures as noisy.")
    placed = [c for c in (report.get("repeats") or cells) if c.get("coresApartFraction") is not None]
    if placed:
        together = sum(1 for c in placed if c["coresApartFraction"] <= TOGETHER_AT_MOST)
        apart = sum(1 for c in placed if c["coresApartFraction"] >= 1 - TOGETHER_AT_MOST)
        lines.append(f"- **CPU placement**: CPUs 0 and 1 shared a cache (corelat's round trip at most "
                     f"{CORES_APART_NS} ns) through {together} of {len(placed)} cells, shared none through {apart}, "
                     f"and moved during the other {len(placed) - together - apart} (the \"CPUs apart\" figures in "
                     f"the iterations column). On a virtual machine the hypervisor decides this; a loopback all-reduce "
                     f"moves every byte between the two CPUs, so compare rounds in the same placement.")
    lines.append("")
    lines.append("## Targets")
    lines.append("")
    lines.append("| target | goal | measured | status | detail |")
    lines.append("|---|---|---|---|---|")
    for t in report["targets"]:
        status = "met" if t["status"] == "met" else f"**{t['status']}**"
        lines.append(f"| {t['target']} | {t['goal']} | {t['measured'] or '–'} | {status} | {t['detail']} |")
    lines.append("")
    lines.append(f"![aggregated elements/s by system and loss rate](chart-{run_['date']}{run_['suffix']}.svg)")
    lines.append("")
    lines.append("## Results")
    lines.append("")
    for (mode, rate, bits, size), group in groups(cells):
        lines.append(f"### {group_title(mode, rate, bits, size)}")
        lines.append("")
        lines.append("| loss | system | TAT p50 ms | TAT p99 ms | elements/s | × Gloo elements/s | × Gloo TAT | goodput "
                     "| retransmissions / all-reduce | drops: socket / qdisc / backlog | wire MB / worker / all-reduce | CPU busy | iterations "
                     "| first call ms | worker CPU s / rank / GB | timed calls' CPU s / rank / GB "
                     "| appliance CPU s / GB | RSS MiB / rank | resends + probes per 1000 packets |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for cell in sorted(group, key=lambda c: (float(c["loss"]), SYSTEMS.index(c["system"]))):
            if not cell["ok"]:
                lines.append(f"| {loss_label(cell['loss'])} | {SYSTEM_LABEL[cell['system']]} | failed: "
                             f"{(cell['error'] or '')[:160].replace('|', '/')} |  |  |  |  |  |  |  |  |  |  |  |  |  |  |  |  |")
                continue
            wire = cell.get("wireBytesPerWorkerPerAllReduce")
            lines.append(
                f"| {loss_label(cell['loss'])} | {SYSTEM_LABEL[cell['system']]} | {fmt(cell['tatP50Ms'], '.2f')} "
                f"| {fmt(cell['tatP99Ms'], '.2f')} | {fmt(cell['elementsPerSec'], '.4g')} "
                f"| {fmt(cell.get('elementsPerSecVsGloo'), '.2f')} | {fmt(cell.get('tatP50VsGloo'), '.2f')} "
                f"| {fmt(cell.get('goodput'), '.3f')} | {fmt(cell.get('retransmissionsPerAllReduce'), '.1f')} "
                f"| {fmt(cell.get('udpBufferDrops'), 'd')} / {fmt(cell.get('qdiscDrops'), 'd')} / "
                f"{fmt(cell.get('backlogDrops'), 'd')} "
                f"| {fmt(wire / 1e6 if wire else None, '.1f')} "
                f"| {fmt(cell['cpuBusyFraction'] * 100 if cell.get('cpuBusyFraction') is not None else None, '.0f')}% "
                f"| {cell['warmups']}+{cell['iterations']}{runs_note(cell)} | {fmt(cell.get('firstTatMs'), '.0f')} "
                f"| {fmt(cell.get('cpuSecPerRankPerGB'), '.2f')} | {fmt(cell.get('timedCpuSecPerRankPerGB'), '.2f')} "
                f"| {fmt(cell.get('applianceCpuSecPerGB'), '.2f')} | {fmt(cell.get('maxRssMiB'), '.0f')} "
                f"| {fmt(cell.get('resendsAndProbesPerMille'), '.2f')} |")
        lines.append("")
    lines.append("## Definitions")
    lines.append("")
    lines.append("- **TAT** (tensor aggregation time): one all-reduce on one rank, from the call to its return, after a "
                 "barrier; warm-ups not timed. A cell's p50 / p99 is the *slowest rank's* p50 / p99. Every result is "
                 "checked element by element outside the timed region (all three systems).")
    lines.append("- **elements/s**: tensor elements / TAT p50 (the paper's aggregated tensor elements per second). "
                 "**× Gloo**: ratio to Gloo in the same cell of the same run.")
    lines.append("- **goodput**: tensor bytes × 8 / TAT p50 / worker link rate (the tbf rate, each direction): the "
                 "fraction of one worker link that the all-reduce delivers as tensor. SwitchML sends and receives the "
                 "tensor once per worker, so its ceiling is 1 less headers (k=2233 at MTU 9000: 8932 of 9014 bytes "
                 "on the wire, 0.991; k=366 at MTU 1500: 0.967); a ring all-reduce moves 2(n-1)/n of it each way, "
                 "ceiling n/(2(n-1)) = 0.67 for 4 workers.")
    lines.append("- **retransmissions / all-reduce**: SwitchML: packets its workers retransmitted in the timed "
                 "all-reduces (sum over ranks) / timed all-reduces. Gloo, OpenMPI: TCP RetransSegs of the worker "
                 "namespaces over the whole cell (warm-ups and barriers included) / all-reduces; on loopback it is "
                 "the host's counter and includes unrelated traffic.")
    lines.append("- **wire MB / worker / all-reduce**: bytes through the worker veths (tx + rx, headers included) "
                 "over the cell / workers / all-reduces (warm-ups included).")
    lines.append("- **drops**: packets the kernel dropped during the cell (not the injected loss, which is counted "
                 "separately as `lossDrops` in the JSON): *socket* = UDP RcvbufErrors + SndbufErrors (a full socket "
                 "buffer; rack: appliance and worker namespaces, loopback: the whole host), *qdisc* = tbf drops on "
                 "the rack's veths, *backlog* = softnet_stat drops (a CPU's input backlog full; whole host).")
    lines.append("- **CPUs apart**: the fraction of a cell's corelat samples (bench/rack/corelat.c: two threads "
                 "pinned to CPUs 0 and 1 meet 4 times a second and bounce one cache line; a sample is the fastest of "
                 f"20 batches of 16 round trips) above {CORES_APART_NS} ns, where the two CPUs share no cache. A "
                 "sample is skipped when one thread is not scheduled within 100 us, so a busy cell has fewer.")
    lines.append("- **CPU busy**: the whole host's CPU utilisation during the cell (/proc/stat), including other "
                 "people's work on the same cores.")
    lines.append("- **first call ms**: the slowest rank's TAT of the very first all-reduce of the cell, a warm-up: the "
                 "cold start (connections, SwitchML's job join and its JVM's JIT). The timed calls follow the warm-ups, "
                 "which are the same number for every system (the iterations column: warm-ups + timed).")
    lines.append("- **worker CPU s / rank / GB**: user + system CPU seconds of a rank's whole process tree (getrusage of "
                 "the reaped children: JVM start, JIT and GC for SwitchML; interpreter, torch import and Gloo's threads "
                 "for Gloo; mpirun's children for OpenMPI) / GB of tensor it all-reduced in the cell (warm-ups included). "
                 "**RSS MiB / rank**: the largest resident set of the rank's processes.")
    lines.append("- **timed calls' CPU s / rank / GB**: the steady state's CPU: each rank's process CPU time "
                 "(clock_gettime(CLOCK_PROCESS_CPUTIME_ID): every thread, JIT and GC included; Python's "
                 "time.process_time_ns() for the torch ranks) from the call to the return of each timed all-reduce, "
                 "summed, / GB it all-reduced in the timed calls. A host agent's CPU clock is read around the same calls "
                 "and shared among the ranks it serves. Start-up, warm-ups, and the fill and check between calls are "
                 "not in it.")
    lines.append("- **appliance CPU s / GB**: the appliance JVM's user + system CPU seconds (/proc/PID/stat) from its "
                 "\"ready\" (start-up and its rehearsal done) to the end of the ranks, every thread, / GB of tensor one "
                 "rank all-reduced in the cell (warm-ups included). On loopback it runs on the ranks' cores: the "
                 "loopback comparisons add it, shared among the ranks, to the ranks' CPU in the timed calls (\"the "
                 "host's CPU per rank per GB\").")
    lines.append("- **resends + probes per 1000 packets**: SwitchML workers' retransmitted updates plus probes, over the "
                 "whole cell, per 1000 packets they sent; the JSON also has how many of them were shown to be unneeded.")
    lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# SVG (hand-written)

def esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_max(value):
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * 10 ** exp >= value:
            return step * 10 ** exp
    return 10 ** (exp + 1)


def svg(report):
    cells = [c for c in report["cells"]]
    panels = groups(cells)
    systems = [s for s in SYSTEMS if any(c["system"] == s for c in cells)]
    panel_w, panel_h, cols = 460, 260, 2
    margin_l, margin_b, margin_t = 70, 50, 40
    rows = max(1, math.ceil(len(panels) / cols))
    width = cols * panel_w + 20
    height = rows * panel_h + 80
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">'
           f'Aggregated tensor elements/s by system and loss rate ({esc(report["run"]["date"])}, '
           f'{report["run"]["workers"]} workers)</text>']
    lx = 20
    for s in systems:
        out.append(f'<rect x="{lx}" y="32" width="12" height="12" fill="{SYSTEM_COLOUR[s]}"/>')
        out.append(f'<text x="{lx + 16}" y="42">{SYSTEM_LABEL[s]}</text>')
        lx += 90
    out.append(f'<text x="{lx + 10}" y="42" fill="#555">× = failed or not run; number over a bar: ratio to Gloo</text>')
    for index, ((mode, rate, bits, size), group) in enumerate(panels):
        ox = (index % cols) * panel_w + 10
        oy = (index // cols) * panel_h + 60
        plot_x, plot_y = ox + margin_l, oy + margin_t
        plot_w, plot_h = panel_w - margin_l - 20, panel_h - margin_t - margin_b
        losses = sorted({float(c["loss"]) for c in group})
        top = nice_max(max([c["elementsPerSec"] for c in group if c["ok"]] or [1]))
        out.append(f'<text x="{ox + panel_w / 2}" y="{oy + 22}" text-anchor="middle" font-weight="bold">'
                   f'{esc(group_title(mode, rate, bits, size))}</text>')
        for tick in range(5):
            value = top * tick / 4
            y = plot_y + plot_h - plot_h * tick / 4
            out.append(f'<line x1="{plot_x}" y1="{y:.1f}" x2="{plot_x + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{plot_x - 5}" y="{y + 4:.1f}" text-anchor="end">{value / 1e6:.3g} M</text>')
        out.append(f'<line x1="{plot_x}" y1="{plot_y}" x2="{plot_x}" y2="{plot_y + plot_h}" stroke="black"/>')
        out.append(f'<line x1="{plot_x}" y1="{plot_y + plot_h}" x2="{plot_x + plot_w}" y2="{plot_y + plot_h}" stroke="black"/>')
        out.append(f'<text x="{ox + 12}" y="{plot_y + plot_h / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 {ox + 12} {plot_y + plot_h / 2})">elements/s</text>')
        slot_w = plot_w / max(1, len(losses))
        bar_w = min(36, (slot_w - 16) / max(1, len(systems)))
        for li, loss in enumerate(losses):
            cx = plot_x + slot_w * li + slot_w / 2
            out.append(f'<text x="{cx:.1f}" y="{plot_y + plot_h + 16}" text-anchor="middle">loss {loss_label(loss)}</text>')
            for si, s in enumerate(systems):
                x = cx - bar_w * len(systems) / 2 + bar_w * si
                cell = next((c for c in group if c["system"] == s and abs(float(c["loss"]) - loss) < 1e-12), None)
                if cell is None or not cell["ok"]:
                    out.append(f'<text x="{x + bar_w / 2:.1f}" y="{plot_y + plot_h - 4}" text-anchor="middle" '
                               f'fill="{SYSTEM_COLOUR[s]}">×</text>')
                    continue
                h = plot_h * cell["elementsPerSec"] / top
                out.append(f'<rect x="{x + 1:.1f}" y="{plot_y + plot_h - h:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                           f'fill="{SYSTEM_COLOUR[s]}"><title>{SYSTEM_LABEL[s]}, loss {loss_label(loss)}: '
                           f'{cell["elementsPerSec"]:.4g} elements/s, TAT p50 {cell["tatP50Ms"]:.2f} ms</title></rect>')
                ratio = cell.get("elementsPerSecVsGloo")
                if ratio is not None and s != "gloo":
                    out.append(f'<text x="{x + bar_w / 2:.1f}" y="{plot_y + plot_h - h - 3:.1f}" text-anchor="middle" '
                               f'font-size="9">{ratio:.2f}×</text>')
    out.append(f'<text x="10" y="{height - 8}" fill="#555">{esc(report["machine"]["nproc"])} cores '
               f'({esc(report["machine"]["cpuModel"])}), kernel {esc(report["machine"]["kernel"])}; '
               f'{esc(report["run"]["command"])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summarise-cell")
    parser.add_argument("--cells")
    parser.add_argument("--out")
    parser.add_argument("--tag", default="")
    parser.add_argument("--command", default="bench/rack/run.sh")
    parser.add_argument("--started", default="")
    parser.add_argument("--finished", default="")
    parser.add_argument("--build", default="unknown")
    parser.add_argument("--build-dirty", default="false")
    parser.add_argument("--build-time", default="")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--mtu", default="")
    parser.add_argument("--appliance-rate", default="none")
    parser.add_argument("--mac", default="off")
    parser.add_argument("--multicast", default="off")
    parser.add_argument("--shard-cpus", default="none")
    parser.add_argument("--fast-retransmit", default="off")
    parser.add_argument("--offload", default="auto")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    if args.summarise_cell:
        print(summary_line(load_cell(args.summarise_cell)))
        return 0
    if not args.cells or not args.out:
        parser.error("give --cells and --out, or --summarise-cell")

    all_cells = [load_cell(d) for d in sorted(glob.glob(os.path.join(args.cells, "*"))) if os.path.isdir(d)]
    cells = pick_medians(all_cells)
    add_ratios(cells)
    date = (args.started or datetime.datetime.now(datetime.timezone.utc).isoformat())[:10]
    suffix = f"-{args.tag}" if args.tag else ""
    # Never overwrite an earlier run's results (a second run on the same day with the same tag): number it.
    taken = lambda sfx: os.path.exists(os.path.join(args.out, f"results-{date}{sfx}.json"))
    if taken(suffix):
        n = 2
        while taken(f"{suffix}-{n}"):
            n += 1
        print(f"results-{date}{suffix}.json exists: writing results-{date}{suffix}-{n}.* instead", file=sys.stderr)
        suffix = f"{suffix}-{n}"
    report = {
        "run": {"date": date, "suffix": suffix, "started": args.started, "finished": args.finished,
                "command": args.command, "build": args.build, "buildDirty": args.build_dirty, "buildTime": args.build_time,
                "workers": args.workers, "mtu": args.mtu, "applianceRate": args.appliance_rate, "mac": args.mac,
                "multicast": args.multicast, "shardCpus": args.shard_cpus, "fastRetransmit": args.fast_retransmit,
                "offload": args.offload, "repeat": args.repeat},
        "machine": machine(cells),
        "definitions": {
            "tat": "call to return of one all-reduce after a barrier; cell p50/p99 = slowest rank's p50/p99",
            "elementsPerSec": "elements / TAT p50",
            "goodput": "tensor bytes * 8 / TAT p50 / worker link rate (each direction)",
            "retransmissions": "SwitchML: retransmitted packets in timed all-reduces; Gloo/MPI: TCP RetransSegs over the cell"},
        "targets": [],
        "cells": cells,
        "repeats": [c for c in all_cells if args.repeat > 1],
    }
    report["targets"] = targets(cells, args.workers)
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"results-{date}{suffix}")
    with open(base + ".json", "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    with open(base + ".md", "w") as f:
        f.write(markdown(report))
    with open(os.path.join(args.out, f"chart-{date}{suffix}.svg"), "w") as f:
        f.write(svg(report))
    print(f"wrote {base}.json, {base}.md, {os.path.join(args.out, f'chart-{date}{suffix}.svg')}")
    print("targets:")
    for t in report["targets"]:
        print(f"  {t['status']:>12}  {t['target']}: {t['measured'] or '-'} (goal {t['goal']}); {t['detail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
