"""The ``switchml`` c10d backend: ``torch.distributed.init_process_group(backend="switchml")``.

``import switchml`` registers it. ``all_reduce`` with SUM or AVG of float32, float16, bfloat16 or
int32 tensors goes through this rank's worker agent to the appliance and returns at once with a
Work whose future completes when the result is back, so DistributedDataParallel launches its next
gradient bucket while the previous one is on the wire. Everything else (broadcast, barrier,
all_gather, reduce_scatter, all_reduce with MIN/MAX/PRODUCT, SUM/AVG of float64, int64 and the
other dtypes the appliance does not carry, send/recv, ...) is delegated to an inner Gloo process
group built from the same store, so a full DDP script runs unchanged.

Ordering contract: every rank must issue the same sequence of SUM/AVG all-reduces (same element
counts, dtypes and ops, same order). DDP does: it all-reduces its buckets in bucket order on every
rank. A rank that breaks it is detected where the data allows and the job aborted (see the agent's
docs); two same-length tensors swapped cannot be told apart.

Tested on Debian's torch 1.13 (Python subclass of ``ProcessGroup``, Work made with
``_create_work_from_future``). Newer torch versions register backends as ``Backend`` subclasses;
the class below picks that base when it exists, but that path is untested.
"""

import atexit
import datetime
import logging
import os
import stat
import threading
import time

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as c10d

from .agent import AgentProcess, JobHostAgent, describe_job_agent, find_launcher, job_name_taken_hint
from .client import Client, SwitchMLError
from .requests import WIRE_DTYPE, arm, check_tensor, withdraw
from .config import Config

__all__ = ["ProcessGroupSwitchML", "register", "current"]

_BASE = getattr(c10d, "Backend", None) or c10d.ProcessGroup
_lock = threading.Lock()
_groups = []
_log = logging.getLogger(__name__)
# the dtypes whose SUM/AVG all-reduces went over Gloo, each logged once
_gloo_dtypes = set()
# what Gloo cannot sum itself: summed in a wider type (int16) or, as NCCL does, reduced with MAX (bool)
_GLOO_WIDER = {torch.int16: (torch.int32, dist.ReduceOp.SUM), torch.bool: (torch.uint8, dist.ReduceOp.MAX)}
# Works handed out and not yet waited for nor asked for their future, kept alive (see _Work), the oldest let go beyond
_KEPT_WORKS = 4096
_work_lock = threading.Lock()
_kept_works = {}


def _ranked(rank, message):
    """``message`` naming ``rank`` (once)."""
    return message if message.startswith("rank %d" % rank) else "rank %d: %s" % (rank, message)


def _seconds(timeout):
    """A Work.wait timeout in seconds, or None for none (torch's kNoTimeout is zero)."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    return seconds if seconds > 0 else None


class _Work(c10d.Work):
    """A Work of the switchml group, as Gloo's behaves: ``wait()`` raises the all-reduce's SwitchMLError and honours
    its timeout; ``result()``, ``is_success()``, ``exception()`` say how it went.

    ``get_future()`` gives a future that never fails (torch 1.13's DDP reducer crashes on a failed one): the tensor
    is marked (NaN) and the failure raised in the thread that took the future, asynchronously (see requests.py).

    pybind11 forgets a Python subclass once only C++ holds the Work (DDP does), and C++ then reaches c10d's base
    Work ("getFuture not implemented", or a ``wait`` that never returns): each Work is kept alive until it is waited
    for or its future taken, the oldest let go beyond _KEPT_WORKS.
    """

    def __init__(self, future, rank, describe, submission=None):
        super().__init__()
        self._future = future
        self._rank = rank
        self._describe = describe
        self._submission = submission
        if submission is not None:
            self._done = submission.done
        else:
            done = self._done = threading.Event()
            future.add_done_callback(lambda _: done.set())
        with _work_lock:
            _kept_works[id(self)] = self
            while len(_kept_works) > _KEPT_WORKS:
                del _kept_works[next(iter(_kept_works))]

    def _release(self):
        with _work_lock:
            if _kept_works.get(id(self)) is self:
                del _kept_works[id(self)]

    def wait(self, timeout=None):
        self._release()
        seconds = _seconds(timeout)
        if not self._done.wait(seconds):
            raise SwitchMLError("rank %d: %s did not complete within %s s (the timeout given to Work.wait); it is still "
                                "in flight" % (self._rank, self._describe, seconds))
        failure = None if self._submission is None else self._submission.failure
        if failure is not None:
            withdraw()
            raise SwitchMLError(str(failure))
        self._future.wait()
        return True

    def get_future(self):
        self._release()
        if self._submission is not None:
            arm(self._submission, threading.get_ident())
        return self._future

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        if not self._done.is_set():
            raise SwitchMLError("rank %d: %s is not complete yet" % (self._rank, self._describe))
        return self.exception() is None

    def exception(self):
        if not self._done.is_set():
            return None
        if self._submission is not None:
            return self._submission.failure
        try:
            self._future.value()
        except Exception as ex:  # noqa: BLE001 - that is the answer
            return ex
        return None

    def result(self):
        self.wait()
        return self._future.value()

    def source_rank(self):
        raise SwitchMLError("source_rank() is defined for recv from any source only")


def current():
    """The live switchml process group of this process, or None."""
    with _lock:
        return _groups[-1] if _groups else None


class ProcessGroupSwitchML(_BASE):
    """One rank's switchml process group: a client of its worker agent, and a Gloo group for the rest.

    Built by ``init_process_group(backend="switchml")``; see the module docs and :mod:`switchml.config`.
    """

    def __init__(self, store, rank, world_size, timeout, options=None):
        super().__init__(rank, world_size)
        self._config = Config(options, rank, world_size, timeout)
        self._gloo = c10d.ProcessGroupGloo(c10d.PrefixStore("switchml-gloo", store), rank, world_size, timeout)
        self._agent = None
        self._client = None
        self._closed = False
        config = self._config
        try:
            if config.host_agent or config.job_agent:
                config.agree(store)
                socket_path, agent_name = ((config.host_agent, None) if config.host_agent else self._job_agent(store))
                try:
                    self._client = Client(socket_path, timeout=config.join_timeout_s + 60,
                                          open_fields=config.open_fields(), agent_name=agent_name,
                                          reply_timeout_s=self._reply_timeout_s(timeout))
                except SwitchMLError as ex:
                    hint = job_name_taken_hint(str(ex), config.job)
                    raise SwitchMLError("%s%s" % (_ranked(rank, str(ex)), hint or "")) from ex
            elif config.socket is None:
                config.agree(store)
                launcher = find_launcher(config.launcher)
                self._agent = AgentProcess(launcher, config.serve_args(), {"SWITCHML_JOB_TOKEN": config.token},
                                           rank, config.job, ready_timeout_s=config.join_timeout_s + 60)
                socket_path = self._agent.socket_path
            else:
                socket_path = config.socket
            if self._client is None:
                try:
                    self._client = Client(socket_path, timeout=60, reply_timeout_s=self._reply_timeout_s(timeout))
                except SwitchMLError as ex:
                    raise SwitchMLError(_ranked(rank, str(ex))) from ex
            if self._client.world_size != world_size or self._client.rank != rank:
                raise SwitchMLError("the agent at %s serves rank %d of %d, but this process is rank %d of %d"
                                    % (socket_path, self._client.rank, self._client.world_size, rank, world_size))
            if rank == 0:
                self._report_placement()
        except BaseException:
            self.shutdown(failed=True)
            raise
        with _lock:
            _groups.append(self)

    def _report_placement(self):
        """Rank 0 says where the job runs (the agent's STATS, before any request): a warning naming each backend of the
        appliance's preference list that passed the job over and why, else an info line."""
        try:
            stats = self._client.stats()
        except SwitchMLError as ex:  # a diagnostic: the first all-reduce meets a broken agent anyway
            _log.warning("switchml job %s: its agent did not say where the job runs: %s", self._client.job, ex)
            return
        backend, passed_over = stats.get("backend"), stats.get("passedOver", "")
        if passed_over:
            _log.warning("switchml job %s runs on backend %s; passed over: %s", self._client.job, backend, passed_over)
        elif backend:
            _log.info("switchml job %s runs on backend %s", self._client.job, backend)

    @staticmethod
    def _reply_timeout_s(timeout):
        """How long the group waits for its agent's replies beyond its all-reduces (a barrier's, destroy's, stats'):
        the group's timeout, as Gloo's collectives are bounded by it (60 s without one)."""
        seconds = _seconds(timeout)
        return 60.0 if seconds is None else seconds

    def _job_agent(self, store):
        """The socket of the agent serving this job's ranks on this host, and how errors name it: local rank 0 starts
        it (``worker host``) and says where it is, or why it could not start, through the store; the others wait."""
        import datetime
        config = self._config
        key = "switchml/job-agent/node%d" % config.node
        if config.starts_job_agent:
            try:
                self._agent = JobHostAgent(find_launcher(config.launcher), config,
                                           ready_timeout_s=config.join_timeout_s + 60)
            except BaseException as ex:
                store.set(key, "error " + str(ex).splitlines()[0][:2000] if str(ex) else "error " + type(ex).__name__)
                raise
            store.set(key, "ok %d %s" % (self._agent.pid, self._agent.socket_path))
            return self._agent.socket_path, self._agent.describe()
        starter = config.rank - config.local_rank
        wait_s = config.join_timeout_s + 90
        deadline = time.monotonic() + wait_s
        stale = None
        while True:
            try:
                store.wait([key], datetime.timedelta(seconds=max(1.0, deadline - time.monotonic())))
            except RuntimeError:
                raise SwitchMLError("rank %d: rank %d (local rank 0 of this host) did not start the job's host agent "
                                    "within %d s%s" % (config.rank, starter, wait_s,
                                                       "" if stale is None else "; the store names one that is gone: "
                                                       + stale)) from None
            state, _, detail = store.get(key).decode("utf-8").partition(" ")
            if state != "ok":
                raise SwitchMLError("rank %d: rank %d (local rank 0 of this host) could not start the job's host "
                                    "agent: %s" % (config.rank, starter, detail))
            pid, _, socket_path = detail.partition(" ")
            # the key may be an earlier attempt's (a store that outlives a restart): use it only while its agent runs,
            # and only where this user's private directory holds it (anyone who can write the store could name one)
            stale = _job_agent_problem(pid, socket_path)
            if stale is None:
                return socket_path, describe_job_agent(socket_path, pid, starter)
            if time.monotonic() > deadline:
                raise SwitchMLError("rank %d: the store names a job agent of rank %d that cannot be used: %s"
                                    % (config.rank, starter, stale))
            time.sleep(0.05)

    # ---- identity ----------------------------------------------------------------------------------------------

    def getBackendName(self):  # noqa: N802 - the C++ virtual's name
        return "switchml"

    def name(self):
        return "switchml"

    @property
    def client(self):
        """The :class:`switchml.Client` of this rank's agent."""
        return self._client

    @property
    def agent_pid(self):
        """The pid of the agent this group started, or None when it uses one started elsewhere."""
        return None if self._agent is None else self._agent.pid

    # ---- all_reduce through the appliance ------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        op = dist.ReduceOp.SUM if opts is None else opts.reduceOp
        if op == dist.ReduceOp.SUM:
            op_name = "sum"
        elif op == getattr(dist.ReduceOp, "AVG", object()):
            op_name = "average"
        else:
            return self._gloo.allreduce(tensors, opts)
        if len(tensors) != 1:
            raise ValueError("backend switchml all-reduces one tensor per process, got %d" % len(tensors))
        tensor = tensors[0]
        if isinstance(tensor, torch.Tensor) and tensor.dtype not in WIRE_DTYPE:
            return self._allreduce_over_gloo(tensor, op_name)
        check_tensor(tensor, op_name)
        if self._client is None:
            raise SwitchMLError("the switchml process group was destroyed")
        nbytes = tensor.numel() * tensor.element_size()
        label = "switchml::all_reduce(backend=switchml, bytes=%d, dtype=%s, op=%s)" % (
            nbytes, str(tensor.dtype).replace("torch.", ""), op_name)
        with torch.autograd.profiler.record_function(label) as scope:
            submission = self._client.submit_safe(tensor, op_name, result=tensors, checked=True)
            # the profiler range lasts until the result is back, not just the submission
            future = scope._call_end_callbacks_on_future(submission.future)
        return _Work(future, self.rank(), "all_reduce of %d %s elements through %s"
                     % (tensor.numel(), str(tensor.dtype).replace("torch.", ""), self._client.agent_name), submission)

    def _allreduce_over_gloo(self, tensor, op_name):
        """SUM or AVG of a dtype the appliance does not carry (float64, int64, int16, int8, uint8, bool), exact, over
        the inner Gloo group, as Gloo would: AVG (which Gloo lacks) divides the sum by the world size afterwards,
        truncating integers towards zero as the int32 path does."""
        dtype = tensor.dtype
        if dtype not in _gloo_dtypes:
            _gloo_dtypes.add(dtype)
            _log.info("rank %d: SUM/AVG all-reduces of %s tensors go over Gloo (the appliance carries float32, float16, "
                      "bfloat16 and int32)", self.rank(), str(dtype).replace("torch.", ""))
        if op_name == "average" and dtype == torch.bool:
            raise TypeError("all_reduce with AVG of a bool tensor is not defined; use SUM (logical or) or MAX")
        wire, op = _GLOO_WIDER.get(dtype, (dtype, dist.ReduceOp.SUM))
        staged = tensor if wire == dtype else tensor.to(wire)
        opts = c10d.AllreduceOptions()
        opts.reduceOp = op
        work = self._gloo.allreduce([staged], opts)
        if staged is tensor and op_name == "sum":
            return work
        world_size = self.size()

        def finish(future):
            future.value()  # Gloo's error, if any
            with torch.no_grad():
                if op_name == "average":
                    if staged.is_floating_point() or staged.is_complex():
                        staged.div_(world_size)
                    else:
                        torch.div(staged, world_size, rounding_mode="trunc", out=staged)
                if staged is not tensor:
                    tensor.copy_(staged)  # int16 wraps as an int16 sum would
            return [tensor]

        return _Work(work.get_future().then(finish), self.rank(), "all_reduce (AVG) of %s over Gloo" % dtype)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._gloo.allreduce_coalesced(tensors, opts) if opts is not None else self._gloo.allreduce_coalesced(tensors)

    # ---- delegated to Gloo -------------------------------------------------------------------------------------

    def broadcast(self, tensors, opts=None):
        return self._gloo.broadcast(tensors, opts) if opts is not None else self._gloo.broadcast(tensors)

    def barrier(self, opts=None):
        # a barrier also waits for this rank's all-reduces in flight, as c10d's barrier implies
        if self._client is not None:
            self._client.synchronize()
        return self._gloo.barrier(opts) if opts is not None else self._gloo.barrier()

    def allgather(self, output_tensors, input_tensors, opts=None):
        return (self._gloo.allgather(output_tensors, input_tensors, opts) if opts is not None
                else self._gloo.allgather(output_tensors, input_tensors))

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 - c10d's parameter names
        return (self._gloo._allgather_base(output, input, opts) if opts is not None
                else self._gloo._allgather_base(output, input))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        return (self._gloo.allgather_coalesced(output_lists, input_list, opts) if opts is not None
                else self._gloo.allgather_coalesced(output_lists, input_list))

    def gather(self, output_tensors, input_tensors, opts=None):
        return (self._gloo.gather(output_tensors, input_tensors, opts) if opts is not None
                else self._gloo.gather(output_tensors, input_tensors))

    def scatter(self, output_tensors, input_tensors, opts=None):
        return (self._gloo.scatter(output_tensors, input_tensors, opts) if opts is not None
                else self._gloo.scatter(output_tensors, input_tensors))

    def reduce(self, tensors, opts=None):
        return self._gloo.reduce(tensors, opts) if opts is not None else self._gloo.reduce(tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        return (self._gloo.reduce_scatter(output_tensors, input_tensors, opts) if opts is not None
                else self._gloo.reduce_scatter(output_tensors, input_tensors))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        args = (output, input, output_split_sizes, input_split_sizes)
        return self._gloo.alltoall_base(*args, opts) if opts is not None else self._gloo.alltoall_base(*args)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return (self._gloo.alltoall(output_tensors, input_tensors, opts) if opts is not None
                else self._gloo.alltoall(output_tensors, input_tensors))

    def send(self, tensors, dst_rank, tag):
        return self._gloo.send(tensors, dst_rank, tag)

    def recv(self, tensors, src_rank, tag):
        return self._gloo.recv(tensors, src_rank, tag)

    def recv_anysource(self, tensors, tag):
        return self._gloo.recv_anysource(tensors, tag)

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        if self._client is not None:
            self._client.synchronize()
        return self._gloo.monitored_barrier(timeout, wait_all_ranks) if timeout is not None else \
            self._gloo.monitored_barrier(wait_all_ranks=wait_all_ranks)

    # ---- lifecycle ---------------------------------------------------------------------------------------------

    def stats(self):
        """The agent's counters, plus this client's request count and the agent's time in them."""
        if self._client is None:
            raise SwitchMLError("the switchml process group was destroyed")
        counters = self._client.stats()
        counters["client_requests"] = self._client.requests
        counters["client_agent_us"] = self._client.agent_us
        return counters

    def shutdown(self, failed=False):
        """Close the session and stop the agent this group started (at once when ``failed``: the group never
        started, so no other rank's session will end cleanly). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        with _lock:
            if self in _groups:
                _groups.remove(self)
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - stopping anyway
                pass
        if self._agent is not None:
            self._agent.stop(timeout_s=0 if failed else 10.0)


def _job_agent_problem(pid, socket_path):
    """Why the job agent a store key names cannot be used (None when it can): its process must run, and its socket
    must be this user's, in a directory of this user's that nobody else may enter."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return "pid %s does not run" % pid
    except PermissionError:
        return "pid %s is another user's" % pid
    try:
        directory = os.lstat(os.path.dirname(socket_path))
        sock = os.lstat(socket_path)
    except (OSError, ValueError) as ex:
        return "%s: %s" % (socket_path, ex)
    uid = os.getuid()
    if not stat.S_ISDIR(directory.st_mode) or directory.st_uid != uid or stat.S_IMODE(directory.st_mode) != 0o700:
        return "%s is not a directory of this user's with mode 0700" % os.path.dirname(socket_path)
    if not stat.S_ISSOCK(sock.st_mode) or sock.st_uid != uid:
        return "%s is not a socket of this user's" % socket_path
    return None


def _create(store, rank, world_size, timeout, options=None):
    if current() is not None:
        raise SwitchMLError("backend switchml serves one process group per process (the default group); create "
                            "subgroups with backend='gloo'")
    return ProcessGroupSwitchML(store, rank, world_size, timeout, options)


def _create_extended(backend_options, pg_options):
    return _create(backend_options.store, backend_options.group_rank, backend_options.group_size,
                   backend_options.timeout, pg_options)


def _shutdown_all():
    with _lock:
        groups = list(_groups)
    for group in groups:
        group.shutdown()


_original_destroy = None


def _destroy_process_group(group=None):
    """torch.distributed.destroy_process_group, which also stops the switchml agents it ends."""
    from torch.distributed import distributed_c10d
    if group is None or group == distributed_c10d.GroupMember.WORLD:
        victims = [g for g in list(_groups)]
    else:
        victims = [g for g in list(_groups) if g is group]
    try:
        return _original_destroy(group)
    finally:
        for victim in victims:
            victim.shutdown()


def register():
    """Register backend ``switchml`` with torch.distributed (``import switchml`` does); idempotent."""
    global _original_destroy
    if "SWITCHML" in getattr(dist.Backend, "_plugins", {}):
        return
    try:
        dist.Backend.register_backend("switchml", _create_extended, extended_api=True)
    except TypeError:  # a torch without the extended creator API
        dist.Backend.register_backend("switchml", _create)
    # c10d's destroy_process_group calls nothing on the group: wrap it so that the agent stops there
    from torch.distributed import distributed_c10d
    if _original_destroy is None:
        _original_destroy = distributed_c10d.destroy_process_group
        distributed_c10d.destroy_process_group = _destroy_process_group
        dist.destroy_process_group = _destroy_process_group
    atexit.register(_shutdown_all)

