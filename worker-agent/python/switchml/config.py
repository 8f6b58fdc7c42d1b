"""Configuration of the ``switchml`` process group: ``pg_options`` keys, ``SWITCHML_*`` variables, torchrun's.

Every option has a ``pg_options`` key (a dict passed to ``init_process_group(..., pg_options=...)``),
an environment variable, and a default; ``pg_options`` wins. A bad value fails naming the key or
variable. The job name and token default to values every rank agrees on through the process
group's store.
"""

import os
import re
import shlex
import stat

from .client import SwitchMLError

__all__ = ["OPTIONS", "Config"]

# key: (environment variable, default, one-line doc)
OPTIONS = {
    "appliance": ("SWITCHML_APPLIANCE", "127.0.0.1", "appliance host, or host:port of its control endpoint"),
    "control_port": ("SWITCHML_CONTROL_PORT", "7470", "appliance control port (unless appliance says host:port)"),
    "tenant": ("SWITCHML_TENANT", "default", "tenant the job belongs to"),
    "backend": ("SWITCHML_BACKEND", "auto", "where the appliance aggregates the job: auto (its preference list), or "
                                            "software, xdp or tofino (refused, naming why, if that one cannot take it)"),
    "job": ("SWITCHML_JOB", None, "job name; default torch-$TORCHELASTIC_RUN_ID, else one rank 0 picks"),
    "token": ("SWITCHML_JOB_TOKEN", None, "job token (8-128 of [0-9A-Za-z_-]); default a random one from rank 0"),
    "credential_file": ("SWITCHML_CREDENTIAL_FILE", None, "control-plane credentials file (CREATE's auth=)"),
    "tls_ca": ("SWITCHML_TLS_CA", None, "PEM of the appliance's certificate: the control connection uses TLS"),
    "socket": ("SWITCHML_SOCKET", None, "socket of an agent already running for this rank ({rank}, {local_rank} "
                                        "expand); default: start one"),
    "host_agent": ("SWITCHML_HOST_AGENT", "auto", "socket of a 'switchml worker host' agent serving this host's ranks "
                                                  "(one warm agent for all); job: local rank 0 starts one for this "
                                                  "job's ranks on this host, which ends with them; auto: the packaged "
                                                  "agent's socket (switchml-worker-host.service) where it exists and "
                                                  "this rank sets no socket, credentials or TLS of its own, else, under "
                                                  "torchrun with several ranks per host, job; off, or otherwise: start "
                                                  "one agent per rank"),
    "local_reduce": ("SWITCHML_LOCAL_REDUCE", "auto", "with a host agent: sum this host's ranks of the job in the "
                                                      "agent and send them to the appliance as one worker (on, off, or "
                                                      "auto: on when torchrun's $LOCAL_WORLD_SIZE is above 1)"),
    "launcher": ("SWITCHML_LAUNCHER", None, "the switchml launcher; default 'switchml' on PATH"),
    "agent_args": ("SWITCHML_AGENT_ARGS", "", "extra options of the agent a rank or a job starts ('switchml worker "
                                              "serve', or 'worker host' for the job's agent), e.g. '-k 1024 --mac off'"),
    "shm_bytes": ("SWITCHML_SHM_BYTES", str(128 << 20), "size of each agent's shared memory (the staging ring)"),
    "join_timeout_s": ("SWITCHML_JOIN_TIMEOUT_S", "60", "how long agents wait for every rank to join"),
}


# where switchml-worker-host.service (the .deb) serves this host's ranks
HOST_AGENT_SOCKET = "/run/switchml/host/agent.sock"

# the longest slot timeout the appliance accepts (its JobSpec.MAX_TIMEOUT_MS)
MAX_COLLECTIVE_TIMEOUT_MS = 3_600_000
# how much longer the agents wait than the appliance's slot timeout
PROGRESS_MARGIN_MS = 10_000

# 'worker serve' options that 'worker host' does not take (a host agent's sessions set them in OPEN)
_SERVE_ONLY = ("--int32", "--shm-bytes")


def _is_option(arg, names):
    """Whether a command-line word is one of the options ``names``, alone or as ``--name=value``."""
    return any(arg == name or arg.startswith(name + "=") for name in names)


def safe_name(name, limit):
    """A job name reduced to [0-9A-Za-z_.-] (anything else becomes '-') and ``limit`` characters, for names and
    paths made from it."""
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in str(name))[:limit]


def _is_socket(path):
    """Whether a live agent serves the socket: a stale file left by a crashed agent refuses the connection."""
    import socket
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return False
        with socket.socket(socket.AF_UNIX) as probe:
            probe.settimeout(2)
            probe.connect(path)
        return True
    except OSError:
        return False


def _env_or(options, key):
    env, default, _ = OPTIONS[key]
    if options.get(key) is not None:  # None: as if not given
        return str(options[key]), "pg_options['%s']" % key
    value = os.environ.get(env)
    if value is not None and value != "":
        return value, "$" + env
    return default, "default of %s" % key


def _check_name(value, where, pattern, what, show=True):
    """Refuse a name or token the appliance would refuse, naming the option (and the value, unless a secret)."""
    if not re.fullmatch(pattern, value):
        raise ValueError("%s must be %s%s" % (where, what, ": %r" % value if show else " (value not shown)"))


def _int(value, where, minimum, maximum):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be an integer: %r" % (where, value)) from None
    if not minimum <= number <= maximum:
        raise ValueError("%s must be %d..%d: %d" % (where, minimum, maximum, number))
    return number


class Config:
    """The resolved options of one rank's process group.

    :param options: ``pg_options`` (a dict, or None); unknown keys are refused by name.
    :param rank: the group rank; ``local_rank`` comes from ``$LOCAL_RANK`` (torchrun), else ``rank``.
    :param timeout: the process group's timeout (a ``timedelta``; torch's default is 30 minutes), or None: how long
        the job waits for a late rank (the appliance's slot timeout and the agent's progress timeout), at most an
        hour, so that a rank busy between steps (a checkpoint) is waited for as Gloo would wait, not aborted after
        the appliance's default of 2 s.
    """

    def __init__(self, options, rank, world_size, timeout=None):
        options = {} if options is None else options
        if not isinstance(options, dict):
            raise TypeError("pg_options for backend 'switchml' must be a dict of %s, got %s"
                            % (", ".join(sorted(OPTIONS)), type(options).__name__))
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError("unknown switchml pg_options %s; known: %s" % (", ".join(unknown), ", ".join(sorted(OPTIONS))))
        self.rank = rank
        self.world_size = world_size
        # none, zero or negative: the agents' and the appliance's own defaults
        self.collective_timeout_ms = None if timeout is None or timeout.total_seconds() <= 0 else \
            max(10, min(int(timeout.total_seconds() * 1000), MAX_COLLECTIVE_TIMEOUT_MS))
        self.local_rank = _int(os.environ.get("LOCAL_RANK", rank), "$LOCAL_RANK", 0, 1 << 20)
        appliance, where = _env_or(options, "appliance")
        port, port_where = _env_or(options, "control_port")
        # what a host agent's OPEN names only when set: else the agent's own appliance, port (and backend) stand
        self.appliance_set = not where.startswith("default")
        if appliance.startswith("[") or appliance.count(":") > 1:
            raise ValueError("%s: the data plane is IPv4 only; give an IPv4 address or a host name: %r"
                             % (where, appliance))
        if ":" in appliance:
            appliance, _, port = appliance.rpartition(":")
            port_where = where
        if not appliance:
            raise ValueError("%s names no appliance host" % where)
        self.port_set = not port_where.startswith("default")
        self.appliance_host = appliance
        self.control_port = _int(port, port_where, 1, 65535)
        self.tenant, self.tenant_where = _env_or(options, "tenant")
        _check_name(self.tenant, self.tenant_where, r"[0-9A-Za-z_.\-]{1,64}", "1 to 64 of [0-9A-Za-z_.-]")
        self.backend, where = _env_or(options, "backend")
        self.backend_set = not where.startswith("default")
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", self.backend or ""):
            raise ValueError("%s must be auto or a backend's name (software, xdp, tofino): %r" % (where, self.backend))
        self.job, self.job_where = _env_or(options, "job")
        if self.job is not None:
            _check_name(self.job, self.job_where, r"[0-9A-Za-z_.\-]{1,128}", "1 to 128 of [0-9A-Za-z_.-]")
        self.token, self.token_where = _env_or(options, "token")
        if self.token is not None:
            _check_name(self.token, self.token_where, r"[0-9A-Za-z_\-]{8,128}", "8 to 128 of [0-9A-Za-z_-]",
                        show=False)
        self.credential_file, where = _env_or(options, "credential_file")
        if self.credential_file and not os.path.isfile(self.credential_file):
            raise ValueError("%s: no such file: %s" % (where, self.credential_file))
        self.tls_ca, where = _env_or(options, "tls_ca")
        if self.tls_ca and not os.path.isfile(self.tls_ca):
            raise ValueError("%s: no such file: %s" % (where, self.tls_ca))
        socket_path, where = _env_or(options, "socket")
        try:
            self.socket = socket_path.format(rank=rank, local_rank=self.local_rank) if socket_path else None
        except (KeyError, IndexError, ValueError) as ex:
            raise ValueError("%s: %r expands only {rank} and {local_rank} (write {{ and }} for braces): %r"
                             % (where, socket_path, ex)) from None
        self.launcher, _ = _env_or(options, "launcher")
        agent_args, args_where = _env_or(options, "agent_args")
        try:
            self.agent_args = shlex.split(agent_args or "")
        except ValueError as ex:
            raise ValueError("%s cannot be split into options: %s" % (args_where, ex)) from None
        for managed in ("--socket", "--shm", "--job", "--token", "--rank", "--world", "--once", "--backend", "--shm-dir",
                        "--max-sessions", "--exit-after-sessions", "--exit-with-pid", "--delete-socket-dir"):
            if any(_is_option(arg, (managed,)) for arg in self.agent_args):
                raise ValueError("%s must not set %s: the process group sets it" % (args_where, managed))
        self.host_agent, host_where = _env_or(options, "host_agent")
        if self.host_agent not in ("auto", "off", "job") and "/" not in self.host_agent \
                and not self.host_agent.endswith(".sock"):
            raise ValueError("%s must be auto, off, job or the path of a host agent's socket: %r"
                             % (host_where, self.host_agent))
        # job: local rank 0 starts a 'worker host' for the job's ranks on this host (see switchml.agent.JobHostAgent)
        self.job_agent = False
        open_extra = None
        if self.host_agent == "off":
            self.host_agent = None
        elif self.host_agent == "auto":
            open_extra = self._packaged_agent_open_extra(args_where)
            self.host_agent = HOST_AGENT_SOCKET if open_extra is not None else None
            if (self.host_agent is None and not self.socket and not self._serve_only_args()
                    and self._torchrun_local_world(options) > 1):
                self.job_agent = True
        elif self.host_agent == "job":
            self.host_agent = None
            self.job_agent = True
            if self._serve_only_args():
                raise ValueError("%s: %s are options of a rank's own agent ('worker serve'), not of the job's agent "
                                 "('worker host'); use pg_options shm_bytes, or host_agent=off"
                                 % (args_where, ", ".join(self._serve_only_args())))
        if (self.host_agent or self.job_agent) and self.socket:
            raise ValueError("%s and a socket (SWITCHML_SOCKET / pg_options['socket']) exclude each other" % host_where)
        if self.host_agent:
            for key in ("credential_file", "tls_ca"):
                value, where = _env_or(options, key)
                if value:
                    raise ValueError("%s is the host agent's own option (switchml worker host --%s), not a rank's; "
                                     "unset it with %s" % (where, key.replace("_", "-"), host_where))
        if self.host_agent and open_extra is None:
            open_extra = self._open_extra(args_where)
        self.open_extra = open_extra if self.host_agent else {}
        self.local_world = self._local_world(options)
        shm_bytes, where = _env_or(options, "shm_bytes")
        self.shm_bytes = _int(shm_bytes, where, 4096, 1 << 40)
        if self.shm_bytes % 4:
            raise ValueError("%s must be a multiple of 4: %d" % (where, self.shm_bytes))
        timeout, where = _env_or(options, "join_timeout_s")
        self.join_timeout_s = _int(timeout, where, 1, 3600)

    def _packaged_agent_open_extra(self, args_where):
        """SWITCHML_HOST_AGENT=auto: the OPEN fields of the agent options (see _open_extra) when the packaged host
        agent serves (its socket takes a connection) and this rank sets nothing only an agent of its own could honour
        (a socket, credentials, TLS, other agent options); None when it is not to be used."""
        if self.socket or self.credential_file or self.tls_ca or os.environ.get("SWITCHML_CREDENTIAL"):
            return None
        try:
            open_extra = self._open_extra(args_where)
        except ValueError:
            return None
        return open_extra if _is_socket(HOST_AGENT_SOCKET) else None

    def _local_world(self, options):
        """How many of the job's ranks this host runs, when the host agent sums them (else 1): torchrun's
        $LOCAL_WORLD_SIZE, which must divide the world; rank R is then local rank R % $LOCAL_WORLD_SIZE."""
        mode, where = _env_or(options, "local_reduce")
        if mode not in ("on", "off", "auto"):
            raise ValueError("%s must be on, off or auto: %r" % (where, mode))
        if not (self.host_agent or self.job_agent):
            if mode == "on":
                raise ValueError("%s is on, but no host agent serves this rank (SWITCHML_HOST_AGENT): an agent of "
                                 "its own cannot sum the host's ranks" % where)
            return 1
        if mode == "off":
            return 1
        local_world, numbered = self._torchrun_numbering()
        if local_world is None:
            if mode == "auto":
                return 1
            raise ValueError("%s is on, but $LOCAL_WORLD_SIZE (set by torchrun) says nothing of this host's ranks"
                             % where)
        if not numbered:
            if mode == "auto":
                return 1  # not torchrun's numbering: one worker per rank
            raise ValueError("%s: rank %d of %d is not local rank %d of nodes of $LOCAL_WORLD_SIZE=%d ranks"
                             % (where, self.rank, self.world_size, self.local_rank, local_world))
        return local_world

    def _serve_only_args(self):
        """The agent_args that only 'worker serve' takes: a job agent ('worker host') would refuse them."""
        return [arg for arg in self.agent_args if _is_option(arg, _SERVE_ONLY)]

    def _torchrun_numbering(self):
        """$LOCAL_WORLD_SIZE (None where unset) and whether this rank is local rank R % $LOCAL_WORLD_SIZE of nodes of
        that many ranks, as torchrun numbers them."""
        size = os.environ.get("LOCAL_WORLD_SIZE")
        if not size:
            return None, False
        local_world = _int(size, "$LOCAL_WORLD_SIZE", 1, 1 << 20)
        return local_world, not (self.world_size % local_world or self.rank % local_world != self.local_rank)

    def _torchrun_local_world(self, options):
        """$LOCAL_WORLD_SIZE where torchrun numbers this rank as local rank R % $LOCAL_WORLD_SIZE and local reduction
        is not off, else 1: when SWITCHML_HOST_AGENT=auto starts an agent for the job's ranks on this host."""
        mode, _ = _env_or(options, "local_reduce")
        local_world, numbered = self._torchrun_numbering()
        return local_world if mode != "off" and numbered and local_world > 1 else 1

    @property
    def starts_job_agent(self):
        """Whether this rank starts the job's agent for its host (``host_agent=job``): local rank 0, or every rank
        where the host's ranks are not summed (each is then a node of its own)."""
        return self.job_agent and (self.local_world == 1 or self.local_rank == 0)

    @property
    def node(self):
        """This rank's host among the job's, when its ranks are summed there (rank // local world)."""
        return self.rank // self.local_world

    def host_args(self, socket_path, parent_pid):
        """``switchml worker host`` options of the agent that local rank 0 starts for the job's ranks on this host:
        this rank's appliance, tenant, credentials and agent options; it serves the host's ranks of this job and
        exits after them, or when ``parent_pid`` exits."""
        args = ["--socket", socket_path] + self._rank_agent_args() + [
            "--max-sessions", str(self.local_world), "--exit-after-sessions", str(self.local_world),
            "--exit-with-pid", str(parent_pid), "--delete-socket-dir"]
        if self.shm_bytes > 1 << 30:
            args += ["--max-shm-bytes", str(self.shm_bytes)]
        if not any(_is_option(arg, ("--warm-up-ms",)) for arg in self.agent_args):
            # the ranks wait for it: init_process_group plus the first 100 MB call took 2.1-2.3 s with 300 ms,
            # 2.8-2.9 s with 1000 ms and 2.1 s with none, whose first call was 1.5-2.1x the steady state
            # (bench/pytorch/first_calls.sh, docs/bench/pytorch-ddp-2026-11-25.md)
            args += ["--warm-up-ms", "300"]
        return args + self.agent_args

    def _open_extra(self, where):
        """The job options of agent_args that a host agent's OPEN carries (-k, -s, --mac and the two timeouts); anything
        else is refused."""
        fields = {"-k": "k", "--lanes": "k", "-s": "s", "--slots": "s", "--mac": "mac",
                  "--slot-timeout-ms": "slotTimeoutMs", "--progress-timeout-ms": "progressTimeoutMs"}
        extra = {}
        args = list(self.agent_args)
        while args:
            arg = args.pop(0)
            name, eq, value = arg.partition("=")
            if name not in fields:
                raise ValueError("%s: %s is not a job option a host agent takes (it takes -k, -s, --mac, "
                                 "--slot-timeout-ms and --progress-timeout-ms; the rest "
                                 "are 'switchml worker host' options)" % (where, name))
            if not eq:
                if not args:
                    raise ValueError("%s: %s needs a value" % (where, name))
                value = args.pop(0)
            extra[fields[name]] = value
        return extra

    def open_fields(self):
        """The OPEN fields of this rank's session in a host agent (call :meth:`agree` first): the appliance and the
        backend only where configured, else the agent's own stand."""
        fields = {"job": self.job, "rank": self.rank, "world": self.world_size, "token": self.token,
                  "shmBytes": self.shm_bytes, "joinTimeoutMs": self.join_timeout_s * 1000}
        if self.appliance_set:
            fields["appliance"] = self.appliance_host
        if self.port_set:
            fields["controlPort"] = self.control_port
        if self.backend_set:
            fields["backend"] = self.backend
        if not self.tenant_where.startswith("default"):
            fields["tenant"] = self.tenant  # checked against the agent's before it joins anything
        if self.local_world > 1:
            fields["localRank"] = self.local_rank
            fields["localWorld"] = self.local_world
        if self.collective_timeout_ms is not None:
            fields["slotTimeoutMs"] = self.collective_timeout_ms
            fields["progressTimeoutMs"] = self.progress_timeout_ms
        fields.update(self.open_extra)
        return fields

    def agree(self, store):
        """Fill in the job name and token that every rank uses, through the process group's store.

        The job name is ``torch-$TORCHELASTIC_RUN_ID`` under torchrun with an ``--rdzv_id`` (or
        ``--standalone``), else rank 0's random pick; the token rank 0's random pick unless configured.
        """
        import secrets
        if self.job is None:
            run_id = os.environ.get("TORCHELASTIC_RUN_ID")
            if run_id and run_id != "none":
                self.job = "torch-" + safe_name(run_id, 120)
                self.job_where = "$TORCHELASTIC_RUN_ID"
            else:
                self.job = self._shared(store, "job", "torch-" + secrets.token_hex(6))
                self.job_where = "rank 0's pick"
        if self.token is None:
            self.token = self._shared(store, "token", secrets.token_hex(16))
            self.token_where = "rank 0's pick"
        # every node must sum alike: the appliance's job has one worker per node, or one per rank, never a mix; rank 0
        # says how many it sums, and a rank that sums checks it (bounded: a rank 0 on an agent socket of its own says
        # nothing)
        if store is None or not (self.rank == 0 or self.local_world > 1):
            return
        if self.rank != 0:
            import datetime
            try:
                store.wait(["switchml/local_world"], datetime.timedelta(seconds=self.join_timeout_s))
            except RuntimeError:
                raise ValueError("rank %d would have %d ranks of its host summed in the host agent, but rank 0 said "
                                 "nothing of its own within %d s (does it use an agent socket of its own?); set "
                                 "SWITCHML_LOCAL_REDUCE=off for one worker per rank"
                                 % (self.rank, self.local_world, self.join_timeout_s)) from None
        first = int(self._shared(store, "local_world", str(self.local_world)))
        if first != self.local_world:
            raise ValueError("rank %d would have %d ranks of its host summed in the host agent, rank 0 %d: every node "
                             "must run as many ranks (torchrun's --nproc_per_node) and use a host agent for that; set "
                             "SWITCHML_LOCAL_REDUCE=off for one worker per rank" % (self.rank, self.local_world, first))

    def _shared(self, store, key, proposal):
        full = "switchml/" + key
        if self.rank == 0:
            store.set(full, proposal)
            return proposal
        return store.get(full).decode("utf-8")

    def serve_args(self):
        """``switchml worker serve`` options for this rank (the token goes in the environment)."""
        return (["--world", str(self.world_size), "--rank", str(self.rank), "--job=" + self.job,
                 "--shm-bytes", str(self.shm_bytes)] + self._rank_agent_args() + self.agent_args)

    def _rank_agent_args(self):
        """The options of this rank that an agent it starts takes as its own, a rank's (``worker serve``) or the job's
        (``worker host``): appliance, tenant, backend, join timeout, credentials, TLS. Values that come from the
        configuration are joined to their option (``--tenant=T``), so that none is read as an option of its own or, with
        a leading '@', as picocli's argument file."""
        args = ["--appliance=" + self.appliance_host, "--control-port", str(self.control_port),
                "--tenant=" + self.tenant, "--backend=" + self.backend,
                "--join-timeout-ms", str(self.join_timeout_s * 1000)]
        if self.credential_file:
            args += ["--credential-file=" + self.credential_file]
        if self.tls_ca:
            args += ["--tls-ca=" + self.tls_ca]
        if self.collective_timeout_ms is not None:
            for option, value in (("--slot-timeout-ms", self.collective_timeout_ms),
                                  ("--progress-timeout-ms", self.progress_timeout_ms)):
                if not any(_is_option(arg, (option,)) for arg in self.agent_args):  # agent_args win
                    args += [option, str(value)]
        return args

    @property
    def progress_timeout_ms(self):
        """The agents' progress timeout under a collective timeout: 10 s past the appliance's slot timeout, so that
        a rank that does not come is named by the appliance (``missing ranks [R]``) before an agent gives up on its
        own without knowing whom it waited for."""
        return None if self.collective_timeout_ms is None else self.collective_timeout_ms + PROGRESS_MARGIN_MS
