"""Start and stop the worker agents a process group runs itself.

Where no running agent is named (``SWITCHML_SOCKET``, ``SWITCHML_HOST_AGENT``), the process group
starts one through the installed launcher (``switchml`` on PATH, or ``$SWITCHML_LAUNCHER``):

- :class:`AgentProcess`: a rank's own agent, ``worker serve --once``, which exits after its session,
  or when this process exits, also before it connected (``--exit-with-pid``: the job is aborted
  naming the rank). Its socket and shared memory are in a directory of mode 0700 of its own. The job
  token travels in the agent's environment, not on its command line.
- :class:`JobHostAgent`: under torchrun with several ranks per host, local rank 0 starts one
  ``worker host`` for the job's ranks on this host, which sums them there and sends the sum to the
  appliance as one worker (one JVM and one copy on the link per host instead of one per rank). Its
  socket and the sessions' shared memory are in a directory of mode 0700 (in :func:`default_shm_dir`); it serves as many sessions as the host has ranks and exits
  after the last ends, or when local rank 0's process exits (leaving the job, so that every other
  rank learns of it). The other local ranks learn its socket through the process group's store.
"""

import collections
import os
import shutil
import subprocess
import tempfile
import threading
import time

from .client import SwitchMLError
from .config import safe_name

__all__ = ["AgentProcess", "JobHostAgent", "default_shm_dir", "find_launcher"]

#: The package's tmpfs of huge pages (run-switchml-shm.mount): a 2 MiB page faults once where 4 KiB pages would fault
#: 512 times, which is most of a job's first all-reduce on a VM (docs/bench/host-shm-2026-11-29.md).
PACKAGED_SHM_DIR = "/run/switchml/shm"

_READY = "switchml worker serve ready:"
_HOST_READY = "switchml worker host ready:"
_INSTALL_HINT = ("install the switchml package (apt install ./switchml_*.deb puts 'switchml' in /usr/bin; it needs "
                 "a JDK 25, e.g. Temurin 25), or set SWITCHML_LAUNCHER to the launcher's path, or start "
                 "'switchml worker serve' yourself and set SWITCHML_SOCKET to its --socket")


def find_launcher(explicit=None):
    """The launcher to run: ``explicit``, else ``$SWITCHML_LAUNCHER``, else ``switchml`` on PATH.

    :raises SwitchMLError: naming what to install when there is none.
    """
    launcher = explicit or os.environ.get("SWITCHML_LAUNCHER")
    if launcher:
        if not (os.path.isfile(launcher) and os.access(launcher, os.X_OK)):
            raise SwitchMLError("SWITCHML_LAUNCHER=%s is not an executable file; %s" % (launcher, _INSTALL_HINT))
        return launcher
    found = shutil.which("switchml")
    if found is None:
        raise SwitchMLError("cannot start the switchml worker agent: no 'switchml' launcher on PATH; " + _INSTALL_HINT)
    return found


def default_shm_dir():
    """Where a process group's own agents keep their socket and shared memory: the package's tmpfs of huge pages,
    ``/run/switchml/shm``, when it is mounted and writable, else ``/dev/shm`` (the agents' own default too)."""
    if os.path.ismount(PACKAGED_SHM_DIR) and os.access(PACKAGED_SHM_DIR, os.W_OK):
        return PACKAGED_SHM_DIR
    return "/dev/shm"


class _AgentChild:
    """A launcher child process that prints a ready line, in a private directory of its own: the plumbing both kinds
    of agent share."""

    _ready_prefix = _READY
    _what = "the switchml worker agent for rank %d"
    _ready_means = "every rank's agent must join job '%s'"

    def _make_directory(self, prefix, shm_dir=None):
        """A directory only this user can enter, for the agent's socket and shared memory, made before the agent
        binds its socket there (a socket in a shared directory could be reached between its bind and its chmod, and
        a host agent makes its files mode 0660 for its group); in ``shm_dir`` when writable, else in $TMPDIR."""
        shm_dir = shm_dir or default_shm_dir()
        root = shm_dir if os.path.isdir(shm_dir) and os.access(shm_dir, os.W_OK) else tempfile.gettempdir()
        self.directory = tempfile.mkdtemp(prefix=prefix, dir=root)
        self.socket_path = os.path.join(self.directory, "agent.sock")

    def _start(self, launcher, command, env, rank, job, ready_timeout_s):
        """Run the agent and wait for its ready line; on any failure, nothing is left (process or directory)."""
        try:
            self._run(launcher, command, env, rank, job, ready_timeout_s)
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def _run(self, launcher, command, env, rank, job, ready_timeout_s):
        self.rank = rank
        self.job = job
        self.command = command
        self._lines = collections.deque(maxlen=200)
        self._ready = threading.Event()
        self._exited = threading.Event()
        environment = dict(os.environ)
        environment.update(env)
        try:
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, env=environment)
        except OSError as ex:
            raise SwitchMLError("cannot run the switchml launcher %s: %s; %s" % (launcher, ex, _INSTALL_HINT)) from ex
        self.pid = self.process.pid
        self._pump = threading.Thread(target=self._read_output, name="switchml-agent-output-%d" % rank, daemon=True)
        self._pump.start()
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            # not ready, timed out, or interrupted (KeyboardInterrupt, torchrun's SIGTERM handler): never leave it
            self._stop_process(0)
            raise

    def _read_output(self):
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._lines.append(line)
            if line.startswith(self._ready_prefix):
                self._ready.set()
            if os.environ.get("SWITCHML_AGENT_LOG") == "1":
                print("[switchml agent rank %d] %s" % (self.rank, line), flush=True)
        self.process.wait()
        self._exited.set()

    def output(self):
        """The agent's last output lines, for error messages."""
        return "\n".join(self._lines)

    def _wait_ready(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while not self._ready.is_set():
            if self._exited.is_set():
                code = self.process.returncode
                lines = [line for line in self._lines if line.startswith("ERROR") or "switchml:" in line]
                detail = lines[-1] if lines else self.output()[-2000:]
                hint = job_name_taken_hint(detail, self.job)
                if not hint and code in (2, 126, 127) and (
                        "no JDK" in detail or "no Java" in detail or "not found" in detail):
                    hint = " -- " + _INSTALL_HINT
                raise SwitchMLError("%s exited with code %s before it was ready: %s%s\ncommand: %s\nits output:\n%s"
                                    % (self._what % self.rank, code, detail, hint, " ".join(self.command),
                                       self.output()))
            if time.monotonic() > deadline:
                raise SwitchMLError("%s was not ready within %.0f s (%s); its output:\n%s"
                                    % (self._what % self.rank, timeout_s, self._ready_means % self.job, self.output()))
            self._ready.wait(0.05)

    def stop(self, timeout_s=10.0):
        """Wait for the agent to exit (it does after its last session), else terminate it; delete its directory (the
        agent deletes it itself when it exits, also when this process was killed; this is for a killed agent)."""
        try:
            self._stop_process(timeout_s)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _stop_process(self, timeout_s):
        if self.process.poll() is None:
            if not self._exited.wait(timeout_s if self._ready.is_set() else 0):
                try:
                    self.process.terminate()
                except OSError:
                    pass
                if not self._exited.wait(5):
                    try:
                        self.process.kill()
                    except OSError:
                        pass
                    self._exited.wait(5)


def job_name_taken_hint(detail, job):
    """What to do when the appliance refused the job's name ('' when ``detail`` says nothing of the kind)."""
    if "token does not match" in detail or "already exists" in detail or "asked for" in detail:
        return (" -- job name '%s' is taken on the appliance by an earlier or concurrent run; set SWITCHML_JOB (or "
                "pg_options job=...) to a fresh name, or give torchrun a unique --rdzv_id" % job)
    return ""


def describe_job_agent(socket_path, pid, starter):
    """How errors name the job's agent: where it serves, its pid, and the rank that started it."""
    return "the job's host agent at %s (pid %s), started by rank %d" % (socket_path, pid, starter)


class AgentProcess(_AgentChild):
    """A ``switchml worker serve`` child process for one rank, ready to take a client session.

    :param launcher: path of the ``switchml`` launcher.
    :param args: the ``worker serve`` options (job, rank, world, appliance ...), without socket and shm.
    :param env: extra environment (the job token).
    :param ready_timeout_s: how long to wait for every rank's agent to join and report ready.
    """

    def __init__(self, launcher, args, env, rank, job, ready_timeout_s, shm_dir=None):
        # the job's name kept short: the socket path must fit sun_path (108 bytes) under a long $TMPDIR too
        self._make_directory("switchml-%s-rank%d-" % (safe_name(job, 32), rank), shm_dir)
        self.shm_path = os.path.join(self.directory, "agent.shm")
        command = [launcher, "worker", "serve"] + list(args) + [
            "--socket", self.socket_path, "--shm", self.shm_path, "--once",
            "--exit-with-pid", str(os.getpid()), "--delete-socket-dir"]
        self._start(launcher, command, env, rank, job, ready_timeout_s)


class JobHostAgent(_AgentChild):
    """The ``switchml worker host`` child process that local rank 0 starts for its job's ranks on this host.

    :param launcher: path of the ``switchml`` launcher.
    :param config: the rank's :class:`switchml.config.Config` (its ``host_args`` make the command line).
    :param ready_timeout_s: how long to wait for the agent to warm up and report ready.
    """

    _ready_prefix = _HOST_READY
    _what = "the job's host agent started by rank %d"
    _ready_means = "it is ready once its JVM has started and warmed up, before any rank of job '%s' joins"

    def __init__(self, launcher, config, ready_timeout_s, shm_dir=None):
        # the sessions' shared memory goes in the same private directory: a host agent makes it mode 0660 (its group
        # is the packaged agent's trust boundary), which elsewhere would let the user's group at the job's tensors
        self._make_directory("switchml-%s-node%d-" % (safe_name(config.job, 32), config.node), shm_dir)
        command = [launcher, "worker", "host"] + config.host_args(self.socket_path, os.getpid()) + [
            "--shm-dir", self.directory]
        self._start(launcher, command, {}, config.rank, config.job, ready_timeout_s)

    def describe(self):
        """How the other local ranks' errors name it."""
        return describe_job_agent(self.socket_path, self.pid, self.rank)


