"""Client of a local SwitchML worker agent (``switchml worker serve``, or a session of ``switchml worker host``).

Protocol version 2 (one UTF-8 text line each way, fields ``key=value`` separated by spaces; only
``message`` may hold spaces and runs to the end of the line)::

    INFO            -> OK version=2 shm=PATH shmBytes=N rank=R world=W k=K ... dtypes=float32,int32 pipeline=P
    ALLREDUCE offset=BYTES count=ELEMS op=sum|average [dtype=float32|int32] [id=ID]
                    -> OK us=MICROS [id=ID] | ERR message=...
    STATS           -> OK requests=N allReduces=N packetsSent=N ...
    CLOSE           -> OK

A host agent (``switchml worker host``, one warm agent for every rank of the host) first takes
``OPEN job=NAME rank=R world=W token=T [appliance=HOST] [controlPort=P] [k=K] [s=S] ...``, joins the job and
answers like ``INFO`` (or ``ERR message=...``); the connection is then this rank's session.

Tensor data travels only through the shared-memory file named by ``INFO``. Requests are pipelined:
the client writes a tensor (or a piece of it) into a free range of the file, sends the request and
goes on; the agent puts it on the wire at once and answers requests in the order they came. A
reader thread takes the replies, copies each result back into its tensor and completes the
tensor's future. The file is used as a ring: ranges are freed in request order, and a submission
waits while the ring is full.

Shared memory is sparse: a page takes memory (of /dev/shm, a tmpfs shared by every session on the host) when first
written. The client reserves each range with ``posix_fallocate`` before it writes it (the staging ring up to its
high-water mark, in steps of 2 MiB; a shared tensor when it is carved), so a full tmpfs is a SwitchMLError naming the
file, the bytes and what to change instead of a SIGBUS that kills the process.

Ordering contract: every rank must make the same sequence of all-reduce calls (the same element
counts, dtypes and ops, in the same order). Calls from several threads of one process are
serialized in the order they take the client's lock, which the ranks must agree on.
"""

import collections
import itertools
import mmap
import os
import socket
import sys
import threading
import urllib.parse

import torch

from .errors import SwitchMLError
from .requests import WIRE_DTYPE, Request, Submission, arm, check_tensor, critical_section, fail_submission

__all__ = ["Client", "SwitchMLError", "ddp_comm_hook", "check_tensor"]

_PROTOCOL_VERSION = 2
# the step in which the staging ring is reserved (the agent's SharedMemoryRegion.RESERVE_GRANULE_BYTES)
_RESERVE_GRANULE_BYTES = 2 << 20


def _parse(line):
    """Split a reply line into ``{"": verb, key: value, ...}``; ``message`` runs to the end."""
    line = line.strip()
    verb, _, rest = line.partition(" ")
    fields = {"": verb}
    while rest:
        key, eq, value = rest.partition("=")
        if not eq:
            raise SwitchMLError("malformed reply from the agent: %r" % line)
        key = key.strip()
        if key == "message":
            fields[key] = value
            break
        value, _, rest = value.partition(" ")
        fields[key] = value
    return fields


class Client:
    """One training process's connection to its rank's agent.

    Connects to the agent's Unix-domain socket, asks it for the shared-memory file and maps it.
    :meth:`all_reduce_async` returns at once with a ``torch.futures.Future``; :meth:`all_reduce`
    waits for it.

    Attributes after construction: ``rank``, ``world_size``, ``lanes`` (k, elements per packet),
    ``shm_path``, ``shm_bytes``, ``piece_elements`` (the most elements sent in one request),
    ``dtypes`` (wire types the agent serves), ``requests`` (all-reduce requests answered) and
    ``agent_us`` (microseconds from each request's arrival at the agent to its result, summed).

    :param socket_path: the agent's ``--socket``; default ``$SWITCHML_SOCKET``.
    :param timeout: seconds to wait for the connection and INFO (and OPEN's join); replies to all-reduces are
        awaited as long as the agent takes (it fails a stalled all-reduce itself after its ``--progress-timeout-ms``).
    :param open_fields: a dict of ``OPEN`` fields (job, rank, world, token, ...) when ``socket_path`` is a host
        agent's socket: the session for this rank is opened (the job joined) first.
    :param reply_timeout_s: how long :meth:`synchronize`, :meth:`stats` and :meth:`close` wait for the agent's
        replies (None: as long as it takes); the process group passes its timeout.
    :raises SwitchMLError: when the agent cannot be reached, is busy with another client, or
        speaks another protocol version.
    """

    def __init__(self, socket_path=None, timeout=None, open_fields=None, agent_name=None, reply_timeout_s=None):
        path = socket_path or os.environ.get("SWITCHML_SOCKET")
        if not path:
            raise ValueError("no agent socket: pass socket_path or set SWITCHML_SOCKET "
                             "(the --socket of 'switchml worker serve')")
        self.socket_path = str(path)
        # how errors name the agent, e.g. who started it
        self.agent_name = agent_name or "the switchml agent at %s" % self.socket_path
        self.reply_timeout_s = reply_timeout_s
        self._submit_lock = threading.Lock()
        self._cond = threading.Condition()
        self._inflight = collections.deque()
        # replies taken in whose futures the reply thread is still completing (synchronize waits for them too)
        self._completing = 0
        self._ids = itertools.count()
        self._failure = None
        self._closed = False
        self._reader_thread = None
        self._pinned = False
        self.requests = 0
        self.agent_us = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(self.socket_path)
        except OSError as ex:
            self._sock.close()
            raise SwitchMLError("cannot connect to %s: %s (is %s running and ready?)"
                                % (self.agent_name, ex, "it" if agent_name else "'switchml worker serve'")) from ex
        self._reader = self._sock.makefile("rb")
        self._mm = None
        self._fd = None
        self._shm = None
        self._reserved = 0
        self._ring_reserved_bytes = 0
        asked = "INFO"
        try:
            if open_fields is not None:
                asked = "OPEN (rank %s of job %s)" % (open_fields.get("rank"), open_fields.get("job"))
                for key, value in open_fields.items():
                    if not str(value) or any(c.isspace() for c in str(value)):
                        raise ValueError("OPEN field %s must be a non-empty value without spaces: %r" % (key, value))
                self._sock.sendall(("OPEN " + " ".join("%s=%s" % item for item in open_fields.items()) + "\n")
                                   .encode("utf-8"))
                opened = self._read_reply()
                if opened[""] != "OK":
                    raise SwitchMLError("the switchml host agent at %s refused rank %s of job %s: %s"
                                        % (self.socket_path, open_fields.get("rank"), open_fields.get("job"),
                                           opened.get("message", "no reason given")))
            asked = "INFO"
            self._sock.sendall(b"INFO\n")
            info = self._read_reply()
            if info[""] != "OK":
                raise SwitchMLError(info.get("message", "agent refused INFO"))
            if int(info.get("version", "0")) != _PROTOCOL_VERSION:
                raise SwitchMLError("agent speaks bridge protocol version %s, this client %d; use the switchml "
                                    "Python package of the same release as the agent"
                                    % (info.get("version"), _PROTOCOL_VERSION))
            byte_order = info.get("byteOrder", "LITTLE_ENDIAN").split("_")[0].lower()
            if info.get("dtype") != "float32" or byte_order != sys.byteorder:
                raise SwitchMLError("agent's shared memory holds %s %s, this process needs float32 %s-endian"
                                    % (info.get("dtype"), info.get("byteOrder"), sys.byteorder))
            self.rank = int(info["rank"])
            self.world_size = int(info["world"])
            self.lanes = int(info["k"])
            self.job = info.get("job")
            self.tenant = info.get("tenant")
            self.dtypes = tuple(info.get("dtypes", "float32").split(","))
            self.pipeline = int(info.get("pipeline", "1"))
            self.shm_path = info["shm"]
            self.shm_bytes = int(info["shmBytes"])
            # kept open to reserve the ranges written (posix_fallocate)
            self._fd = os.open(self.shm_path, os.O_RDWR | os.O_CLOEXEC)
            self._mm = mmap.mmap(self._fd, self.shm_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self._shm = {"float32": torch.frombuffer(self._mm, dtype=torch.float32),
                         "int32": torch.frombuffer(self._mm, dtype=torch.int32)}
        except socket.timeout as ex:
            self.close()
            raise SwitchMLError("%s did not answer %s within %s s (socket %s)"
                                % (self.agent_name, asked, timeout, self.socket_path)) from ex
        except BaseException:
            self.close()
            raise
        self._sock.settimeout(None)
        self._size_ring(self.shm_bytes // 4)
        self._ring_head = 0
        self._reader_thread = threading.Thread(target=self._read_loop, name="switchml-replies-%d" % self.rank,
                                               daemon=True)
        self._reader_thread.start()

    def _size_ring(self, capacity):
        self.capacity = capacity
        # whole chunks of k per piece keep every piece's block-exponent chunks aligned with the tensor's, and
        # pieces of half the ring let a large tensor's next piece be written while the previous is on the wire
        half = self.capacity // 2
        if half >= self.lanes:
            self.piece_elements = half - half % self.lanes
        elif self.capacity >= self.lanes:
            self.piece_elements = self.capacity - self.capacity % self.lanes
        else:
            self.piece_elements = self.capacity

    def shared_tensor(self, count, dtype=torch.float32):
        """A tensor of ``count`` elements that lives in the agent's shared memory: all-reducing it (or a contiguous
        slice of it) sends its range as it is, with no copy in or out (the agent writes the result in place).

        It is carved from the end of the staging ring, which shrinks by as much, and stays until the client
        closes. Use it for a buffer that is all-reduced often (a benchmark's tensor, a flat gradient buffer). As with
        any tensor, do not touch it, nor start another all-reduce of an overlapping part of it, until the future
        completes: the agent reads and writes it in place meanwhile.

        :param dtype: ``torch.float32`` or ``torch.int32`` (the wire types).
        :raises ValueError: when less than one packet's worth of ring would be left. Requests in flight are waited
            for first.
        """
        wire = {torch.float32: "float32", torch.int32: "int32"}.get(dtype)
        if wire is None or wire not in self.dtypes:
            raise TypeError("shared tensors hold %s, not %s" % (" or ".join(self.dtypes), dtype))
        count = int(count)
        with self._submit_lock:
            self.synchronize()  # the ring is re-sized below: nothing of it may be in flight
            self._raise_if_failed()
            return self._carve(count, wire)

    def _carve(self, count, wire):
        with self._cond:
            left = self.capacity - count
            if count < 1 or left < min(self.lanes, self.capacity):
                raise ValueError("shared_tensor(%d) leaves %d elements of the %d-element staging ring; give the agent "
                                 "more shared memory (shm_bytes)" % (count, left, self.capacity))
            self._reserve(left * 4, count * 4)
            self._size_ring(left)
            self._ring_head = 0
            self._reserved += count
            return self._shm[wire][left:left + count]

    # ---- submission side -------------------------------------------------------------------------------------

    def all_reduce(self, tensor, op="sum"):
        """All-reduce ``tensor`` in place across the job's ranks, wait, and return it.

        See :meth:`all_reduce_async` for the tensors taken and the precision.

        A NaN or an infinity in any rank's input is carried: the chunk of k elements that holds it comes back NaN
        on every rank, as Gloo's sum is not finite there either.

        :raises SwitchMLError: with the agent's message when the job failed (a rank died, the appliance went away).
        """
        return self.all_reduce_async(tensor, op).wait()

    def all_reduce_async(self, tensor, op="sum"):
        """Start an in-place all-reduce of ``tensor`` and return a ``torch.futures.Future`` of it.

        float32, float16 and bfloat16 tensors are summed in float32 by the appliance (the 16-bit
        types widen exactly and the result is rounded back once); int32 tensors are summed exactly
        (wrapping like int32) through the agent's int32 job, and ``average`` of int32 truncates
        towards zero. float64 and other dtypes are refused (TypeError), never narrowed (the process
        group sends them over Gloo). CPU and CUDA tensors are taken; a CUDA tensor is staged through the shared memory (host) and its result
        copied back on the stream that was current at the call. The tensor may have any shape and
        need not be contiguous; it must not be touched until the future completes. Tensors larger
        than ``piece_elements`` go in several requests.

        The result is exact up to SwitchML's block floating-point quantization: for a chunk of k
        elements whose largest magnitude over all ranks is below 2^m, each summed element is off by
        at most n^2 * 2^m / (2^31 - 1) for n ranks (divided by n for ``average``).

        :param tensor: a dense CPU or CUDA ``torch.Tensor`` of a supported dtype.
        :param op: ``"sum"`` or ``"average"``.
        :returns: a Future whose value is ``tensor``; it fails with SwitchMLError when the agent
            answers with an error.
        """
        return self.submit(tensor, op, result=tensor)

    def submit(self, tensor, op, result, raise_in_caller=False):
        """As :meth:`all_reduce_async`, with the future's value given (the process group passes a list).

        :param raise_in_caller: report a failure by raising SwitchMLError in the calling thread (as an
            asynchronous exception, at its next Python instruction outside the client's own critical sections)
            and completing the future with the tensor marked (NaN, or an integer type's minimum), instead of
            failing the future. torch 1.13's DDP reducer crashes (SIGSEGV) on a failed future of a process
            group's Work; the process group arms the raise only where DDP takes the future (Work.get_future).
        """
        submission = self.submit_safe(tensor, op, result) if raise_in_caller else self._submit(tensor, op, result)
        if raise_in_caller:
            arm(submission, threading.get_ident())
        return submission.future

    def submit_safe(self, tensor, op, result, checked=False):
        """Submit as :meth:`submit` does and return the :class:`~switchml.requests.Submission`, whose future never
        fails: a failure marks the tensor, completes the future with ``result``, sets ``failure`` and ``done``, and
        raises in a thread only once one is armed (:func:`switchml.requests.arm`). ``checked``: the caller has run
        :func:`check_tensor` on it already (the process group does, before its profiler range)."""
        return self._submit(tensor, op, result, safe=True, checked=checked)

    def _submit(self, tensor, op, result, safe=False, checked=False):
        if not checked:
            check_tensor(tensor, op)
        wire = WIRE_DTYPE[tensor.dtype]
        if wire not in self.dtypes:
            raise TypeError("the agent serves %s only (started with --int32 off?), not %s"
                            % (",".join(self.dtypes), tensor.dtype))
        total = tensor.numel()
        if total == 0:
            submission = Submission(tensor, tensor, op, 0, None, result, safe)
            submission.future.set_result(result)
            submission.done.set()
            return submission
        stream = None
        if tensor.is_cuda:
            stream = torch.cuda.current_stream(tensor.device)
            self._pin()
        # every piece is sent, or none: a rank that sent part of a tensor would pair the others' next call with the rest
        with torch.no_grad(), critical_section, self._submit_lock:
            self._raise_if_failed()
            flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
            shared = self._shared_offset(flat, total)
            # a shared tensor goes in place as one request, with no staging; any other in pieces through the ring
            piece = total if shared is not None else self.piece_elements
            pieces = (total + piece - 1) // piece
            submission = Submission(tensor, flat, op, pieces, stream, result, safe)
            wire_op = "sum" if wire == "int32" else op
            shm = self._shm[wire]
            for flat_start in range(0, total, piece):
                count = min(piece, total - flat_start)
                if shared is not None:
                    ring_start, region = shared, None
                else:
                    ring_start = self._allocate(count)
                    if ring_start + count > self._ring_reserved_bytes // 4:
                        # a tensor in several pieces will cycle through the whole ring: reserved before its first
                        # piece goes, so that no piece is sent without the others
                        self._reserve_ring(self.capacity if pieces > 1 else ring_start + count)
                    region = shm[ring_start:ring_start + count]
                    region.copy_(flat[flat_start:flat_start + count])
                ident = next(self._ids)
                request = Request(ident, submission, ring_start, count, flat_start, region)
                with self._cond:
                    self._inflight.append(request)
                self._send("ALLREDUCE offset=%d count=%d op=%s dtype=%s id=%d"
                           % (ring_start * 4, count, wire_op, wire, ident))
        return submission

    def _shared_offset(self, flat, total):
        """The element offset of ``flat`` in a :meth:`shared_tensor`, or None when it lies elsewhere."""
        if not self._reserved or flat.is_cuda or flat.dtype not in (torch.float32, torch.int32):
            return None  # a 16-bit view of it is widened through the ring like any 16-bit tensor
        base = self._shm["float32"].data_ptr()
        start = (flat.data_ptr() - base) // 4
        end = self.capacity + self._reserved
        if flat.data_ptr() < base or (flat.data_ptr() - base) % 4 or start < self.capacity or start + total > end:
            return None
        return start

    def stats(self):
        """The agent's counters (``STATS``), answered after every request sent before: a dict of ints; the
        backend the appliance aggregates the job on under ``backend``, and under ``passedOver`` the backends of the
        appliance's preference list that passed the job over with their reasons ("xdp: k=8192 exceeds 358"; ""
        when none); ``int32.backend`` and ``int32.passedOver`` for the int32 job."""
        future = torch.futures.Future()
        answered = threading.Event()
        future.add_done_callback(lambda _: answered.set())
        with critical_section, self._submit_lock:
            self._raise_if_failed()
            with self._cond:
                self._inflight.append(Request(next(self._ids), future=future))
            self._send("STATS")
        if not answered.wait(self.reply_timeout_s):
            raise SwitchMLError("%s did not answer STATS within %s s" % (self.agent_name, self.reply_timeout_s))
        fields = future.wait()
        stats = {}
        for key, value in fields.items():
            if key.endswith("backend"):
                stats[key] = value
            elif key.endswith("passedOver"):  # its reasons hold spaces: form-encoded on the wire
                stats[key] = urllib.parse.unquote_plus(value)
            elif key and value.lstrip("-").isdigit():
                stats[key] = int(value)
        return stats

    def synchronize(self, timeout_s=-1):
        """Wait until every request sent so far has been answered and its future completed.

        :param timeout_s: how long to wait (None: as long as it takes; default: ``reply_timeout_s``).
        :raises SwitchMLError: naming the agent and the requests unanswered when the time is up.
        """
        if timeout_s == -1:
            timeout_s = self.reply_timeout_s
        with self._cond:
            if not self._cond.wait_for(lambda: not (self._inflight or self._completing) or self._failure is not None,
                                       timeout=timeout_s):
                raise SwitchMLError("%s did not answer the %d request(s) in flight within %s s"
                                    % (self.agent_name, len(self._inflight), timeout_s))

    def _pin(self):
        if self._pinned:
            return
        # page-locked staging makes the device copies direct DMA; untested here (no GPU on the build machines)
        tensor = self._shm["float32"]
        try:
            torch.cuda.cudart().cudaHostRegister(tensor.data_ptr(), tensor.numel() * 4, 0)
        except Exception:  # noqa: BLE001 - pageable staging still gives the same results, only slower
            pass
        self._pinned = True

    def _allocate(self, count):
        """Reserve ``count`` elements of the ring, waiting for the oldest requests to come back if it is full."""
        capacity = self.capacity
        with self._cond:
            while True:
                if self._failure is not None:
                    raise SwitchMLError(self._failure)
                ranges = [r for r in self._inflight if r.region is not None]  # staged pieces only
                if not ranges:
                    self._ring_head = 0
                    start = 0
                else:
                    oldest = ranges[0].ring_start
                    head = self._ring_head
                    if head > oldest:  # in use: [oldest, head); free: [head, capacity) and [0, oldest)
                        if capacity - head >= count:
                            start = head
                        elif oldest >= count:
                            start = 0
                        else:
                            start = None
                    else:  # wrapped, in use: [oldest, capacity) and [0, head); free: [head, oldest)
                        start = head if oldest - head >= count else None
                if start is not None:
                    self._ring_head = start + count
                    return start
                self._cond.wait()

    def _reserve_ring(self, end):
        """Reserve the staging ring up to element ``end`` (in whole granules, within the ring)."""
        end_bytes = min(self.capacity * 4, -(-end * 4 // _RESERVE_GRANULE_BYTES) * _RESERVE_GRANULE_BYTES)
        if end_bytes > self._ring_reserved_bytes:
            self._reserve(self._ring_reserved_bytes, end_bytes - self._ring_reserved_bytes)
            self._ring_reserved_bytes = end_bytes

    def _reserve(self, offset, length):
        """Back ``length`` bytes of the shared memory at ``offset`` with memory before they are written.

        :raises SwitchMLError: naming the file, its directory, the bytes asked and free, and what to change, when its
            file system (a tmpfs such as /dev/shm, shared with other sessions' shared memory) cannot back them.
        """
        try:
            os.posix_fallocate(self._fd, offset, length)
        except OSError as ex:
            directory = os.path.dirname(self.shm_path)
            try:
                stat = os.statvfs(directory)
                free = "only %d" % (stat.f_bavail * stat.f_frsize)
            except OSError:
                free = "unknown"
            raise SwitchMLError(
                "cannot reserve %d bytes at offset %d of the shared memory %s: %s (%s bytes free in %s, whose file "
                "system, a tmpfs such as /dev/shm, is shared with other sessions' shared memory, which takes memory "
                "as it is used); lower shm_bytes (SWITCHML_SHM_BYTES, the agent's --shm-bytes) here or in the other "
                "sessions there, or enlarge the file system (mount -o remount,size=... %s)"
                % (length, offset, self.shm_path, ex.strerror or ex, free, directory, directory)) from ex

    def _send(self, line):
        try:
            self._sock.sendall((line + "\n").encode("utf-8"))
        except OSError as ex:
            self._fail("lost the connection to %s: %s" % (self.agent_name, ex))
            raise SwitchMLError(self._failure) from ex

    def _raise_if_failed(self):
        if self._closed:
            raise SwitchMLError("client is closed")
        if self._failure is not None:
            raise SwitchMLError(self._failure)

    # ---- reply side ------------------------------------------------------------------------------------------

    def _read_reply(self):
        reply = self._reader.readline()
        if not reply:
            raise SwitchMLError("%s closed the connection (did it exit?)" % self.agent_name)
        return _parse(reply.decode("utf-8"))

    def _read_loop(self):
        try:
            while True:
                try:
                    fields = self._read_reply()
                except (OSError, ValueError) as ex:
                    raise SwitchMLError("lost the connection to %s: %s" % (self.agent_name, ex)) from ex
                with self._cond:
                    if not self._inflight:
                        raise SwitchMLError("the switchml agent sent a reply nobody asked for: %r" % fields)
                    request = self._inflight[0]
                try:
                    complete = self._on_reply(request, fields)
                except SwitchMLError:
                    raise
                except Exception as ex:  # noqa: BLE001 - this tensor's failure, not the session's
                    complete = self._reply_failed(request, ex)
                # its ring range is free before its caller learns of the result, so that the caller's next call
                # finds it free
                with self._cond:
                    self._inflight.popleft()
                    if complete is not None:
                        self._completing += 1
                    self._cond.notify_all()
                if complete is not None:
                    try:
                        complete()
                    except Exception as ex:  # noqa: BLE001 - this tensor's failure, not the session's
                        self._completion_failed(request, ex)
                    finally:
                        with self._cond:
                            self._completing -= 1
                            self._cond.notify_all()
        except SwitchMLError as ex:
            self._fail(str(ex))
        except BaseException as ex:  # a bug here must not leave futures waiting forever
            self._fail("switchml client reply thread failed: %r" % (ex,))

    def _reply_failed(self, request, ex):
        """Taking a reply in failed for this request alone (its result could not be copied back): its submission fails
        when its last piece is back; the session goes on."""
        submission = request.submission
        if submission is None:
            return lambda: request.future.set_exception(SwitchMLError("rank %s: taking STATS in failed: %r"
                                                                      % (self.rank, ex)))
        if submission.error is None:
            submission.error = self._copy_error(submission, ex)
        submission.pieces_left -= 1
        return (lambda: self._complete(submission)) if submission.pieces_left == 0 else None

    def _completion_failed(self, request, ex):
        future = request.future if request.submission is None else request.submission.future
        if request.submission is not None and not request.submission.done.is_set():
            fail_submission(request.submission, self._copy_error(request.submission, ex))
        elif not future.done():
            future.set_exception(SwitchMLError("rank %s: completing a request failed: %r" % (self.rank, ex)))

    def _copy_error(self, submission, ex):
        tensor = submission.tensor
        return ("rank %s: could not copy the all-reduce result back into the %s tensor of shape %s, strides %s (%s); "
                "this all-reduce failed, the session goes on"
                % (self.rank, str(tensor.dtype).replace("torch.", ""), tuple(tensor.shape), tensor.stride(), ex))

    def _on_reply(self, request, fields):
        """Take a reply in: copy the result out of the ring; return what completes its future once the request has
        left the ring (None while other pieces of its tensor are out)."""
        ok = fields[""] == "OK"
        if request.submission is None:
            if ok:
                return lambda: request.future.set_result(fields)
            return lambda: request.future.set_exception(SwitchMLError(fields.get("message", "STATS refused")))
        if ok and "id" in fields and fields["id"] != str(request.ident):
            raise SwitchMLError("the switchml agent answered request %s out of order (expected %d)"
                                % (fields["id"], request.ident))
        submission = request.submission
        if ok:
            self.requests += 1
            self.agent_us += int(fields.get("us", "0"))
            with torch.no_grad():  # grad mode is per thread: this one's is on
                part = submission.flat[request.flat_start:request.flat_start + request.count]
                if request.region is None:
                    pass  # a shared tensor: the result is in place already
                elif submission.stream is not None:
                    with torch.cuda.stream(submission.stream):
                        part.copy_(request.region)
                else:
                    part.copy_(request.region)
        elif submission.error is None:
            submission.error = fields.get("message", "the agent refused the request")
        submission.pieces_left -= 1
        if submission.pieces_left == 0:
            return lambda: self._complete(submission)
        return None

    def _complete(self, submission):
        if submission.error is not None:
            fail_submission(submission, submission.error)
            return
        with torch.no_grad():
            if submission.op == "average" and submission.flat.dtype == torch.int32:
                torch.div(submission.flat, self.world_size, rounding_mode="trunc", out=submission.flat)
            if submission.flat.data_ptr() != submission.tensor.data_ptr() or not submission.tensor.is_contiguous():
                if submission.stream is not None:
                    with torch.cuda.stream(submission.stream):
                        submission.tensor.copy_(submission.flat.view_as(submission.tensor))
                else:
                    submission.tensor.copy_(submission.flat.view_as(submission.tensor))
        submission.done.set()
        submission.future.set_result(submission.result)

    def _fail(self, message):
        """Fail every request in flight and every later call with ``message``."""
        with self._cond:
            if self._failure is None:
                self._failure = message
            pending = list(self._inflight)
            self._inflight.clear()
            self._cond.notify_all()
        failed = set()
        for request in pending:
            if request.submission is None:
                if not request.future.done():
                    request.future.set_exception(SwitchMLError(self._failure))
            elif id(request.submission) not in failed:
                failed.add(id(request.submission))
                if not request.submission.future.done():
                    fail_submission(request.submission, self._failure)

    # ---- lifecycle -------------------------------------------------------------------------------------------

    def close(self):
        """End the session (an agent started with ``--once`` then exits) and unmap the shared memory.

        Requests still in flight fail with "client is closed".
        """
        sock = getattr(self, "_sock", None)
        if sock is None:
            return
        with critical_section, self._submit_lock:
            self._closed = True
            answered = True
            if self._reader_thread is not None and self._failure is None:
                try:
                    self.synchronize()
                except SwitchMLError as ex:
                    answered = False
                    self._fail("client is closed; %s" % ex)
            if self._reader_thread is not None and self._failure is None and answered:
                # wait for CLOSE's reply, so that the agent is not left writing to a closed socket
                with self._cond:
                    self._inflight.append(Request(next(self._ids), future=torch.futures.Future()))
                try:
                    sock.sendall(b"CLOSE\n")
                except OSError:
                    pass
                with self._cond:
                    self._cond.wait_for(lambda: not self._inflight or self._failure is not None, timeout=5)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            if self._reader_thread is not None:
                self._reader_thread.join(timeout=5)
            self._fail("client is closed")
            self._shm = None
            if self._mm is not None:
                try:
                    self._mm.close()
                except BufferError:
                    pass  # a tensor view of the mapping is still referenced; it goes with the process
                self._mm = None
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._reader.close()
            sock.close()
            self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "Client(socket=%r, rank=%s, world_size=%s, shm=%r)" % (
            self.socket_path, getattr(self, "rank", None), getattr(self, "world_size", None), getattr(self, "shm_path", None))


def ddp_comm_hook(state, bucket):
    """DistributedDataParallel communication hook that averages gradients through SwitchML.

    Register it with ``ddp_model.register_comm_hook(client, switchml.ddp_comm_hook)``: ``state``
    is the :class:`Client` of this rank's agent. The bucket's flattened gradient
    (``bucket.buffer()``, torch 1.13 API) is averaged over all ranks in place; the returned Future
    completes when the result is back, so DDP goes on with the backward pass meanwhile. (With
    ``init_process_group(backend="switchml")`` no hook is needed.)

    :raises SwitchMLError: with the agent's message when the all-reduce fails; it surfaces from
        ``loss.backward()``.
    """
    if not isinstance(state, Client):
        raise TypeError("ddp_comm_hook's state must be a switchml.Client, got %s" % type(state).__name__)
    return state.all_reduce_async(bucket.buffer(), op="average")
