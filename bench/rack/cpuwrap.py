#!/usr/bin/env python3
"""Run a command, pass its output through, and write the CPU time it and its descendants used as JSON.

    cpuwrap.py --out FILE -- COMMAND ARGS...

FILE gets {"userSec", "systemSec", "wallSec", "exitCode", "maxRssKiB"}: getrusage(RUSAGE_CHILDREN) after the command
is reaped, which counts every descendant that was waited for (maxRssKiB: the largest resident set of any of them). SIGTERM and SIGINT are forwarded to the command.
Standard library only.
"""
import json
import resource
import signal
import subprocess
import sys
import time


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "--out" or args[2] != "--":
        print("usage: cpuwrap.py --out FILE -- COMMAND ARGS...", file=sys.stderr)
        return 2
    out, command = args[1], args[3:]
    start = time.monotonic()
    child = subprocess.Popen(command)

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as f:
        json.dump({"userSec": usage.ru_utime, "systemSec": usage.ru_stime,
                   "wallSec": time.monotonic() - start, "exitCode": code, "maxRssKiB": usage.ru_maxrss}, f)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
