"""Client of a local SwitchML worker agent (``switchml worker serve``).

Protocol (one UTF-8 text line each way, fields ``key=value`` separated by spaces; only ``message``
may hold spaces and runs to the end of the line)::

    INFO                                        -> OK version=1 shm=PATH shmBytes=N rank=R world=W k=K ...
    ALLREDUCE offset=BYTES count=ELEMS op=sum|average -> OK us=MICROS | ERR message=...
    CLOSE                                       -> OK

Tensor data travels only through the shared-memory file named by ``INFO``: the client copies
float32 elements into it, asks the agent to all-reduce a range of it in place, and copies the
result back.
"""

import mmap
import os
import socket
import sys
import threading

import torch

__all__ = ["Client", "SwitchMLError", "ddp_comm_hook"]

_OPS = ("sum", "average")
_PROTOCOL_VERSION = 1


class SwitchMLError(RuntimeError):
    """The agent refused or failed a request, or went away.

    ``str(error)`` is the agent's message, for example the appliance's account of a rank whose
    control connection dropped.
    """


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
    Calls are serialized with a lock (the agent handles one request at a time, and every rank must
    issue the same sequence of all-reduces with the same lengths).

    Attributes after construction: ``rank``, ``world_size``, ``lanes`` (k, elements per packet),
    ``shm_path``, ``shm_bytes``, ``piece_elements`` (the most elements sent in one request),
    ``requests`` (all-reduce requests made) and ``agent_us`` (microseconds the agent spent in them).

    :param socket_path: the agent's ``--socket``; default ``$SWITCHML_SOCKET``.
    :param timeout: seconds to wait for any reply, or None to wait as long as the agent does
        (it fails a stalled all-reduce itself after its ``--progress-timeout-ms``).
    :raises SwitchMLError: when the agent cannot be reached, is busy with another client, or
        speaks another protocol version.
    """

    def __init__(self, socket_path=None, timeout=None):
        path = socket_path or os.environ.get("SWITCHML_SOCKET")
        if not path:
            raise ValueError("no agent socket: pass socket_path or set SWITCHML_SOCKET "
                             "(the --socket of 'switchml worker serve')")
        self.socket_path = str(path)
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(self.socket_path)
        except OSError as ex:
            self._sock.close()
            raise SwitchMLError("cannot connect to the switchml agent at %s: %s "
                                "(is 'switchml worker serve' running and ready?)" % (self.socket_path, ex)) from ex
        self._reader = self._sock.makefile("rb")
        self._mm = None
        self._shm = None
        try:
            info = self._request("INFO")
            if int(info.get("version", "0")) != _PROTOCOL_VERSION:
                raise SwitchMLError("agent speaks protocol version %s, this client %d"
                                    % (info.get("version"), _PROTOCOL_VERSION))
            byte_order = info.get("byteOrder", "LITTLE_ENDIAN").split("_")[0].lower()
            if info.get("dtype") != "float32" or byte_order != sys.byteorder:
                raise SwitchMLError("agent's shared memory holds %s %s, this process needs float32 %s-endian"
                                    % (info.get("dtype"), info.get("byteOrder"), sys.byteorder))
            self.rank = int(info["rank"])
            self.world_size = int(info["world"])
            self.lanes = int(info["k"])
            self.shm_path = info["shm"]
            self.shm_bytes = int(info["shmBytes"])
            fd = os.open(self.shm_path, os.O_RDWR)
            try:
                self._mm = mmap.mmap(fd, self.shm_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
            self._shm = torch.frombuffer(self._mm, dtype=torch.float32)
        except BaseException:
            self.close()
            raise
        elements = self.shm_bytes // 4
        # whole chunks of k per piece keep every piece's block-exponent chunks aligned with the tensor's
        self.piece_elements = elements - elements % self.lanes if elements >= self.lanes else elements
        self.requests = 0
        self.agent_us = 0

    def _request(self, line):
        """Send one request line and return the parsed ``OK`` reply; raise SwitchMLError on ``ERR``."""
        try:
            self._sock.sendall((line + "\n").encode("utf-8"))
            reply = self._reader.readline()
        except OSError as ex:
            raise SwitchMLError("lost the connection to the switchml agent at %s: %s" % (self.socket_path, ex)) from ex
        if not reply:
            raise SwitchMLError("the switchml agent at %s closed the connection (did it exit?)" % self.socket_path)
        fields = _parse(reply.decode("utf-8"))
        if fields[""] != "OK":
            raise SwitchMLError(fields.get("message", reply.decode("utf-8").strip()))
        return fields

    def all_reduce(self, tensor, op="sum"):
        """All-reduce ``tensor`` in place across the job's ranks and return it.

        The tensor must live on the CPU and hold float32, float16 or bfloat16 values; float32 is the
        native format (the 16-bit types pass through it exactly). float64 is refused rather than
        narrowed to float32 without a word. It may have any
        shape and need not be contiguous. Tensors larger than the shared memory are reduced in
        pieces of ``piece_elements``, one request each. Every rank must make the same calls with
        the same element counts in the same order.

        The result is exact up to SwitchML's block floating-point quantization: for a chunk of k
        elements whose largest magnitude over all ranks is below 2^m, each summed element is off by
        at most n^2 * 2^m / (2^31 - 1) for n ranks (divided by n for ``average``).

        :param tensor: a floating-point CPU ``torch.Tensor``.
        :param op: ``"sum"`` or ``"average"``.
        :raises SwitchMLError: with the agent's message when the job failed (a rank died, a NaN
            or infinity in the input, the appliance went away).
        """
        if op not in _OPS:
            raise ValueError("op must be 'sum' or 'average': %r" % (op,))
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("all_reduce needs a torch.Tensor, got %s" % type(tensor).__name__)
        if tensor.device.type != "cpu":
            raise TypeError("all_reduce needs a CPU tensor, got one on %s" % tensor.device)
        if not tensor.is_floating_point():
            raise TypeError("all_reduce needs a floating-point tensor, got %s" % tensor.dtype)
        if tensor.dtype == torch.float64:
            # the agent sums float32 through block floating point: passing float64 through it would narrow every
            # element to float32 without saying so
            raise TypeError("all_reduce does not take float64: SwitchML sums float32 (float16 and bfloat16 pass "
                            "through float32 exactly) and would narrow it silently; convert it yourself "
                            "(tensor.float()) if float32 precision is enough")
        total = tensor.numel()
        if total == 0:
            return tensor
        if self._shm is None:
            raise SwitchMLError("client is closed")
        with torch.no_grad(), self._lock:
            contiguous = tensor.is_contiguous()
            flat = tensor.view(-1) if contiguous else tensor.contiguous().view(-1)
            piece = self.piece_elements
            for start in range(0, total, piece):
                count = min(piece, total - start)
                region = self._shm[:count]
                part = flat[start:start + count]
                region.copy_(part)
                reply = self._request("ALLREDUCE offset=0 count=%d op=%s" % (count, op))
                part.copy_(region)
                self.requests += 1
                self.agent_us += int(reply.get("us", "0"))
            if not contiguous:
                tensor.copy_(flat.view_as(tensor))
        return tensor

    def close(self):
        """End the session (the agent keeps running for the next one) and unmap the shared memory."""
        sock = getattr(self, "_sock", None)
        if sock is None:
            return
        try:
            if self._shm is not None:
                sock.sendall(b"CLOSE\n")
                self._reader.readline()
        except OSError:
            pass
        self._shm = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None
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
    (``bucket.buffer()``, torch 1.13 API) is averaged over all ranks in place, and a Future already
    completed with it is returned, as DDP expects.

    :raises SwitchMLError: with the agent's message when the all-reduce fails; it surfaces from
        ``loss.backward()``.
    """
    if not isinstance(state, Client):
        raise TypeError("ddp_comm_hook's state must be a switchml.Client, got %s" % type(state).__name__)
    buffer = bucket.buffer()
    state.all_reduce(buffer, op="average")
    future = torch.futures.Future()
    future.set_result(buffer)
    return future
