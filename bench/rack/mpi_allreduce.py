#!/usr/bin/python3
"""An OpenMPI all-reduce benchmark (mpi4py) over the same float32 tensors as `switchml worker bench`.

Each round: fill the buffer (rank-dependent values whose sum is exact in float32), MPI_Barrier, time
MPI_Allreduce(IN_PLACE, SUM) from the call to its return on every rank (the TAT), then check every element
outside the timed region. Warm-ups are not timed. Rank 0 prints one JSON object with every rank's figures.
Needs Debian's openmpi-bin and python3-mpi4py: run it under mpirun with /usr/bin/python3.
"""
import argparse
import json
import sys
import time

import numpy as np
from mpi4py import MPI

from tat import percentile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--elements", type=int, required=True)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    comm.Barrier()
    if rank == 0:
        # run.sh waits for this line to know that every rank started (an orted sometimes never does).
        print(f"mpi_allreduce: all {world} ranks started", file=sys.stderr, flush=True)
    pattern = (np.arange(args.elements, dtype=np.int64) % 8 + 1).astype(np.float32)
    expected = pattern * np.float32(world * (world + 1) // 2)
    mine = pattern * np.float32(rank + 1)
    buffer = np.empty(args.elements, dtype=np.float32)
    samples_ms = []
    first_ms = None
    error = None
    timed_cpu_ns = 0
    for round_ in range(args.warmups + args.iterations):
        np.copyto(buffer, mine)
        comm.Barrier()
        cpu_start = time.process_time_ns()
        start = time.perf_counter_ns()
        comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
        elapsed = time.perf_counter_ns() - start
        cpu = time.process_time_ns() - cpu_start
        if first_ms is None:
            first_ms = elapsed / 1e6
        if error is None and not np.array_equal(buffer, expected):
            bad = int(np.flatnonzero(buffer != expected)[0])
            error = f"rank {rank} round {round_}: element {bad} is {buffer[bad]}, expected {expected[bad]}"
        # Every rank runs every round so that no rank waits forever for one that stopped.
        if round_ >= args.warmups:
            samples_ms.append(elapsed / 1e6)
            timed_cpu_ns += cpu
    ordered = sorted(samples_ms)
    mine_report = {"rank": rank, "ok": error is None, "error": error, "host": MPI.Get_processor_name(),
                   "samples": len(samples_ms), "tatP50Ms": percentile(ordered, 50),
                   "tatP99Ms": percentile(ordered, 99), "tatMaxMs": ordered[-1] if ordered else float("nan"),
                   "tatMs": samples_ms, "firstTatMs": first_ms, "timedCpuSec": timed_cpu_ns / 1e9}
    reports = comm.gather(mine_report, root=0)
    if rank == 0:
        print(json.dumps({"system": "mpi", "ok": all(r["ok"] for r in reports),
                          "library": MPI.Get_library_version().splitlines()[0], "ranks": reports}), flush=True)
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
