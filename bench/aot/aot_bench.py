#!/usr/bin/python3
"""Start-up and first-call figures of the SwitchML JVMs, with and without the AOT cache.

One repetition: start an appliance (`switchml appliance`), then WORLD worker agents (`switchml worker serve`)
at once, each a fresh JVM, the way the systemd units start them; then one client thread per rank (the
bridge protocol of worker-agent/python, with numpy in place of torch) all-reduces a float32 tensor ITERATIONS
times through shared memory, a barrier before each. Figures:
  appliance_ready_ms   exec of the launcher to "switchml appliance ready" on its stdout
  agent_ready_ms       exec of an agent's launcher to its "switchml worker serve ready" (every rank joined)
  agent_ready_cpu      each agent JVM's CPU seconds (user + sys, every thread) from exec to that line, and the part
                       of it its live JIT compiler threads spent: on a host of fewer cores than JVMs starting at
                       once, readiness is bound by their sum, not by one JVM's wall time
  agent_end_cpu        the same after the last all-reduce: what the agents spent on the job, and how much of it the JIT
  tat_ms[i]            all-reduce i: barrier release to the last rank's reply (the demo's TAT); the first barrier is
                       released once every client has written its inputs, and --think-ms after that
  rss_mb               VmRSS of each JVM after the last all-reduce (and VmHWM, its peak)
SWITCHML_AOT=on|off is passed to the launcher as SWITCHML_AOT=auto|off; anything in SWITCHML_JAVA_OPTS reaches
the JVMs (the launcher's per-command heap default otherwise).

  /usr/bin/python3 bench/aot/aot_bench.py --aot on --reps 5 --size-mb 100 --iterations 20
The agents' shared memory is a tmpfs of huge pages mounted for the run with the options of the package's
run-switchml-shm.mount (--shm huge, the default: root), or /dev/shm (--shm dev).
"""
import argparse, json, mmap, os, socket, statistics, subprocess, sys, threading, time
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, env, tag):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    return p, t0


def wait_line(p, t0, needle, timeout, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("exited before %r: %s" % (needle, "".join(log[-20:])))
        log.append(line)
        if needle in line:
            return (time.monotonic() - t0) * 1e3
    raise RuntimeError("no %r in %d s" % (needle, timeout))


def drain(p, log):
    threading.Thread(target=lambda: [log.append(l) for l in p.stdout], daemon=True).start()


def java_pids():
    pids = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/comm" % d) as f:
                    if f.read().strip() == "java":
                        pids.add(int(d))
            except OSError:
                pass
    return pids


def wait_quiet(limit_s=180):
    """This machine may be shared: wait until no JVM has run for 2 s (up to limit_s); True when it became quiet."""
    deadline = time.monotonic() + limit_s
    calm = 0
    while time.monotonic() < deadline:
        calm = calm + 1 if not java_pids() else 0
        if calm >= 4:
            return True
        time.sleep(0.5)
    return False


class Watch:
    """Samples, every 200 ms, whether a JVM that is not one of ours runs: such a rep is marked contended."""

    def __init__(self, ours):
        self.ours = ours
        self.seen = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.2):
            self.seen |= java_pids() - self.ours

    def done(self):
        self.stop.set()
        self.thread.join()
        return sorted(self.seen)


def busy_s():
    """CPU seconds this machine has spent busy (all CPUs), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def stat_cpu_s(path):
    """User plus system CPU seconds from a /proc stat file (a process's or a thread's)."""
    with open(path) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    return stat_cpu_s("/proc/%d/stat" % pid)


def jit_cpu_s(pid):
    """CPU seconds of a JVM's live JIT compiler threads (C1 and C2), from /proc/PID/task."""
    total = 0.0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if "CompilerThre" not in f.read():
                    continue
            total += stat_cpu_s("/proc/%d/task/%s/stat" % (pid, tid))
        except OSError:
            pass  # a thread that ended meanwhile
    return total


def cpu_split(pid):
    """A JVM's CPU seconds so far and its JIT compilers' part."""
    return {"cpu_s": cpu_s(pid), "jit_s": jit_cpu_s(pid)}


def rounded(cpus, key):
    return [round(c[key], 2) for c in cpus]


def mem(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0
    return out


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.reader = self.sock.makefile("rb")
        info = self.request("INFO")
        self.shm_bytes = int(info["shmBytes"])
        fd = os.open(info["shm"], os.O_RDWR)
        self.mm = mmap.mmap(fd, self.shm_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        self.shm = np.frombuffer(self.mm, dtype=np.float32)

    def request(self, line):
        self.sock.sendall((line + "\n").encode())
        reply = self.reader.readline().decode().split()
        if not reply or reply[0] != "OK":
            raise RuntimeError("agent: %s" % " ".join(reply))
        return dict(f.split("=", 1) for f in reply[1:] if "=" in f)

    def close(self):
        try:
            self.sock.sendall(b"CLOSE\n")
            self.reader.readline()
        except OSError:
            pass
        self.shm = None
        self.sock.close()


def one_rep(args, rep, aot):
    launcher = args.launcher
    env = dict(os.environ, SWITCHML_AOT="auto" if aot == "on" else "off", SWITCHML_JOB_TOKEN="aot-bench-token")
    work = "/tmp/switchml-aot-bench"
    os.makedirs(work, exist_ok=True)
    port = free_port()
    logs = {}
    procs = []
    ours = set()
    quiet = wait_quiet(args.quiet_s)
    watch = Watch(ours)
    busy0, self0 = busy_s(), sum(os.times()[:2])
    try:
        logs["appliance"] = []
        app, t0 = start([launcher, "appliance", "--bind", "127.0.0.1", "--control-port", str(port), "--data-port", "0",
                         "--http-port", "-1", "--dir", work + "/appliance-%d" % rep, "--insecure-control"], env, "appliance")
        procs.append(("appliance", app))
        ours.add(app.pid)
        appliance_ms = wait_line(app, t0, "switchml appliance ready", 60, logs["appliance"])
        drain(app, logs["appliance"])
        agents = []
        for r in range(args.world):
            sock = "%s/r%d.sock" % (work, r)
            cmd = [launcher, "worker", "serve", "--appliance", "127.0.0.1", "--control-port", str(port), "--job",
                   "aotbench%d" % rep, "--world", str(args.world), "--rank", str(r), "--socket", sock,
                   "--shm", os.path.join(args.shm_dir, "switchml-aot-bench-r%d.shm" % r), "--shm-bytes", str(args.shm_bytes)]
            p, t = start(cmd, env, "agent%d" % r)
            procs.append(("agent%d" % r, p))
            ours.add(p.pid)
            agents.append((p, t, sock))
        ready = []
        ready_cpu = []
        for r, (p, t, _) in enumerate(agents):
            logs["agent%d" % r] = []
            ready.append(wait_line(p, t, "switchml worker serve ready", 90, logs["agent%d" % r]))
            # the launcher execs the JVM, so the pid is the JVM's: its CPU from exec to ready, and the JIT's part
            ready_cpu.append(cpu_split(p.pid))
            drain(p, logs["agent%d" % r])
        elements = args.size_mb * 1000000 // 4
        clients = [Client(sock) for (_, _, sock) in agents]
        for r, c in enumerate(clients):
            if elements * 4 > c.shm_bytes:
                raise RuntimeError("tensor larger than --shm-bytes")
            c.shm[:elements] = np.float32(r + 1)
        if args.think_ms > 0:
            time.sleep(args.think_ms / 1000.0)  # a training process's work between its agent's readiness and its first call
        barrier = threading.Barrier(args.world + 1)
        start_ns = [0] * args.iterations
        end_ns = [[0] * args.world for _ in range(args.iterations)]
        errors = []

        def run(r, c):
            try:
                for i in range(args.iterations):
                    barrier.wait()
                    c.request("ALLREDUCE offset=0 count=%d op=sum" % elements)
                    end_ns[i][r] = time.monotonic_ns()
                    if i + 1 < args.iterations:
                        c.shm[:elements] = np.float32(r + 1)  # inputs again for the next round
            except Exception as ex:  # noqa
                errors.append("rank %d: %s" % (r, ex))
                barrier.abort()

        threads = [threading.Thread(target=run, args=(r, c)) for r, c in enumerate(clients)]
        for t in threads:
            t.start()
        for i in range(args.iterations):
            barrier.wait()
            start_ns[i] = time.monotonic_ns()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("; ".join(errors))
        expected = args.world * (args.world + 1) / 2.0
        for r, c in enumerate(clients):
            worst = float(np.max(np.abs(c.shm[:elements] - expected)))
            if worst > 1e-3 * expected:
                raise RuntimeError("rank %d: last result off by %g from %g" % (r, worst, expected))
        tats = [(max(end_ns[i]) - start_ns[i]) / 1e6 for i in range(args.iterations)]
        rss = {name: mem(p.pid) for name, p in procs}
        end_cpu = [cpu_split(p.pid) for name, p in procs if name != "appliance"]
        if args.jcmd_dir:
            # with SWITCHML_JAVA_OPTS=-XX:NativeMemoryTracking=summary ...: heap and native memory of every JVM
            os.makedirs(args.jcmd_dir, exist_ok=True)
            jcmd = os.path.join(os.environ.get("JAVA_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64"), "bin", "jcmd")
            for name, p in procs:
                with open(os.path.join(args.jcmd_dir, "%s-%s-rep%d.txt" % (aot, name, rep)), "w") as out:
                    for what in (["GC.heap_info"], ["VM.native_memory", "summary"]):
                        subprocess.run([jcmd, str(p.pid)] + what, stdout=out, stderr=subprocess.STDOUT)
        ours_cpu = sum(cpu_s(p.pid) for _, p in procs) + sum(os.times()[:2]) - self0
        foreign_cpu = max(0.0, busy_s() - busy0 - ours_cpu)
        for c in clients:
            c.close()
        return {"aot": aot, "quiet_before": quiet, "foreign_jvms_during": watch.done(),
                "foreign_cpu_s": foreign_cpu, "appliance_ready_ms": appliance_ms,
                "agent_ready_ms": ready, "agent_ready_cpu": ready_cpu, "agent_end_cpu": end_cpu, "tat_ms": tats,
                "mem_mb": rss}
    finally:
        for name, p in procs:
            if p.poll() is None:
                p.terminate()
        for name, p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.verbose:
            for name, lines in logs.items():
                sys.stderr.write("---- %s\n%s" % (name, "".join(lines[-15:])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", default=os.path.join(ROOT, "switchml"))
    ap.add_argument("--aot", choices=["on", "off", "both"], required=True,
                    help="both: alternate on and off, each rep (on first in even reps, off first in odd ones)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--shm-bytes", type=int, default=268435456, help="the agent's --shm-bytes (its default)")
    ap.add_argument("--shm", choices=["huge", "dev"], default="huge",
                    help="the agents' shared memory: huge, a tmpfs mounted for the run with the options of "
                         "systemd/run-switchml-shm.mount (huge=within_size; needs root), as the package gives them; "
                         "dev: /dev/shm")
    ap.add_argument("--think-ms", type=int, default=0,
                    help="wait this long after the agents are ready and the inputs written before the first all-reduce "
                         "(a training process builds its model and runs its first step before its first call); 0: at once")
    ap.add_argument("--quiet-s", type=float, default=30, help="wait up to this long for no other JVM before each rep")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--jcmd-dir", help="write jcmd GC.heap_info and VM.native_memory summary of each JVM here")
    args = ap.parse_args()
    mounted = None
    if args.shm == "huge":
        mounted = "/tmp/switchml-aot-bench-shm"
        os.makedirs(mounted, exist_ok=True)
        with open(os.path.join(ROOT, "systemd", "run-switchml-shm.mount")) as unit:
            options = [l.strip()[len("Options="):] for l in unit if l.startswith("Options=")][0]
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "switchml-aot-bench-shm", mounted], check=True)
        args.shm_dir = mounted
    else:
        args.shm_dir = "/dev/shm"
    try:
        run(args)
    finally:
        if mounted:
            subprocess.run(["umount", mounted], check=False)


def run(args):
    reps = []
    plan = []
    for rep in range(args.reps):
        modes = [args.aot] if args.aot != "both" else (["on", "off"] if rep % 2 == 0 else ["off", "on"])
        plan += [(rep, m) for m in modes]
    for rep, aot in plan:
        res = one_rep(args, rep, aot)
        tats = res["tat_ms"]
        steady = statistics.median(tats[len(tats) // 2:])
        res["first_ms"] = tats[0]
        res["second_ms"] = tats[1] if len(tats) > 1 else None
        res["steady_median_ms"] = steady
        res["first_over_steady"] = tats[0] / steady
        reps.append(res)
        print("aot=%s rep %d%s, other processes' CPU %.1f s: appliance ready %.0f ms, agents ready %s ms (CPU s at ready %s, "
              "of it the JIT's %s; after the last call %s, the JIT's %s), first all-reduce %.1f ms, second %.1f ms, "
              "steady (median of the 2nd half) %.1f ms, first/steady %.2f; RSS MB %s" % (
                  aot, rep, "" if not res["foreign_jvms_during"] else " (CONTENDED: another JVM ran)",
                  res["foreign_cpu_s"],
                  res["appliance_ready_ms"], [round(x) for x in res["agent_ready_ms"]],
                  rounded(res["agent_ready_cpu"], "cpu_s"), rounded(res["agent_ready_cpu"], "jit_s"),
                  rounded(res["agent_end_cpu"], "cpu_s"), rounded(res["agent_end_cpu"], "jit_s"), tats[0],
                  tats[1] if len(tats) > 1 else float("nan"), steady, res["first_over_steady"],
                  {k: round(v["VmRSS"]) for k, v in res["mem_mb"].items()}), flush=True)
    print(json.dumps({"aot": args.aot, "args": vars(args), "reps": reps}))


if __name__ == "__main__":
    main()
