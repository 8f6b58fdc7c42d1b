"""What the client keeps per tensor and per request in flight, the tensors it takes, and how a failure is reported."""

import ctypes
import itertools
import threading

import torch

from .errors import SwitchMLError

__all__ = ["WIRE_DTYPE", "Request", "Submission", "arm", "check_tensor", "critical_section", "fail_submission",
           "withdraw"]

OPS = ("sum", "average")
# float16 and bfloat16 widen to float32 exactly in the shared memory, and the sum is rounded back once
WIRE_DTYPE = {torch.float32: "float32", torch.float16: "float32", torch.bfloat16: "float32", torch.int32: "int32"}
_SUPPORTED = "float32, float16, bfloat16 and int32"
# numbers submissions and the moments threads are told of a failure
_sequence = itertools.count(1)


def check_tensor(tensor, op):
    """Raise TypeError/ValueError unless ``tensor`` and ``op`` can be all-reduced through the appliance."""
    if op not in OPS:
        raise ValueError("op must be 'sum' or 'average': %r" % (op,))
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("all_reduce needs a torch.Tensor, got %s" % type(tensor).__name__)
    if tensor.layout != torch.strided:
        raise TypeError("all_reduce needs a dense tensor, got layout %s" % tensor.layout)
    if tensor.device.type not in ("cpu", "cuda"):
        raise TypeError("all_reduce needs a CPU or CUDA tensor, got one on %s" % tensor.device)
    if tensor.dtype == torch.float64:
        # the agent sums float32 through block floating point: passing float64 through it would narrow every
        # element to float32 without saying so
        raise TypeError("all_reduce does not take float64: SwitchML sums float32 (float16 and bfloat16 pass "
                        "through float32 exactly) and would narrow it silently; convert it yourself "
                        "(tensor.float()) if float32 precision is enough, or all-reduce it over a gloo group (the "
                        "switchml process group does so itself)")
    if tensor.dtype not in WIRE_DTYPE:
        raise TypeError("all_reduce takes %s tensors through the appliance, not %s" % (_SUPPORTED, tensor.dtype))
    if torch._debug_has_internal_overlap(tensor) == 1:
        raise ValueError("all_reduce cannot write its result into a tensor whose elements share memory (an expanded "
                         "tensor, shape %s, strides %s): all-reduce a copy (tensor.clone())"
                         % (tuple(tensor.shape), tensor.stride()))


class Submission:
    """One tensor's all-reduce: its pieces in flight and the future completed when the last is back."""

    __slots__ = ("tensor", "flat", "op", "future", "pieces_left", "error", "stream", "result", "raise_thread", "safe",
                 "failure", "done", "sequence")

    def __init__(self, tensor, flat, op, pieces, stream, result, safe=False):
        self.tensor = tensor
        self.flat = flat
        self.op = op
        self.future = torch.futures.Future()
        self.pieces_left = pieces
        # the agent's message for a refused piece, reported when the last piece is back
        self.error = None
        self.stream = stream
        self.result = result
        # safe: the future never fails (see fail_submission); raise_thread: the thread told of a failure (arm)
        self.safe = safe
        self.raise_thread = None
        self.failure = None
        self.done = threading.Event()
        self.sequence = next(_sequence)


class Request:
    """One request line in flight: a range of the ring, or a STATS request (``submission`` None)."""

    __slots__ = ("ident", "submission", "ring_start", "count", "flat_start", "region", "future")

    def __init__(self, ident, submission=None, ring_start=0, count=0, flat_start=0, region=None, future=None):
        self.ident = ident
        self.submission = submission
        self.ring_start = ring_start
        self.count = count
        self.flat_start = flat_start
        self.region = region
        self.future = future


_lock = threading.Lock()
# per thread: how deep it is in client critical sections (no asynchronous exception may land there)
_sections = {}
# per thread: the error class set for it (or deferred while it is in a critical section), not delivered yet
_pending = {}
# per thread: the submission sequence number at which it was last told of a failure; submissions made before are not
# raised again (one entry per thread that ever received one)
_told = {}


def _set_async(thread, error_class):
    """Set (or, None, withdraw) the exception ``thread`` raises at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread),
                                               None if error_class is None else ctypes.py_object(error_class))


def _error_class(message, thread):
    """A SwitchMLError subclass raising ``message`` (an asynchronous exception is a class, made without arguments);
    making it marks ``thread`` told, so that the failures of its earlier submissions are not raised again."""
    def init(self):
        SwitchMLError.__init__(self, message)
        _pending.pop(thread, None)
        _told[thread] = next(_sequence)
    return type("SwitchMLError", (SwitchMLError,), {"__init__": init, "__module__": SwitchMLError.__module__})


def _raise_in(thread, submission, message):
    with _lock:
        if thread in _pending or submission.sequence < _told.get(thread, 0):
            return  # one is on its way, or the thread heard of a failure since it made this submission
        error_class = _error_class(message, thread)
        _pending[thread] = error_class
        if not _sections.get(thread):
            _set_async(thread, error_class)


class _CriticalSection:
    """Where the client changes state that must stay consistent (a request queued and sent, all the pieces of a
    tensor): an asynchronous failure is not delivered inside, but raised before it (when already due) or after it.
    Reentrant per thread."""

    def __enter__(self):
        thread = threading.get_ident()
        error_class = None
        with _lock:
            depth = _sections.get(thread, 0)
            if depth == 0 and thread in _pending:
                _set_async(thread, None)  # not delivered yet: raised here instead, before anything changes
                error_class = _pending.pop(thread)
            else:
                _sections[thread] = depth + 1
        if error_class is not None:
            raise error_class()

    def __exit__(self, exc_type, exc, tb):
        thread = threading.get_ident()
        with _lock:
            depth = _sections.pop(thread) - 1
            if depth:
                _sections[thread] = depth
                return False
            error_class = _pending.pop(thread, None)
        if error_class is not None:
            if exc_type is None:
                raise error_class()
            _told[thread] = next(_sequence)  # it leaves with an exception already
        return False


critical_section = _CriticalSection()


def arm(submission, thread):
    """Report a failure of ``submission`` (a safe one) by raising in ``thread`` too, at once when it failed already."""
    with _lock:
        submission.raise_thread = thread
        failure = submission.failure
    if failure is not None:
        _raise_in(thread, submission, str(failure))


def withdraw():
    """The calling thread is told of a failure synchronously (a Work's ``wait``): what was set for it and not yet
    delivered is withdrawn, and the failures of its earlier submissions are not raised again."""
    thread = threading.get_ident()
    with _lock:
        if thread in _pending and not _sections.get(thread):
            _set_async(thread, None)
            del _pending[thread]
        _told[thread] = next(_sequence)


def fail_submission(submission, message):
    """Fail one tensor's all-reduce: its future, or (a safe submission) its Work, marking the tensor and raising in
    the thread that armed it (:func:`arm`).

    A safe submission's future completes with its result (torch 1.13's DDP reducer crashes on a failed future of a
    process group's Work) and its tensor is marked: floating point tensors filled with NaN, integer ones with their
    type's minimum, so that nothing partly summed is mistaken for a result; ``failure`` holds the error, which the
    process group's Work raises from ``wait()`` and ``result()``.
    """
    error = SwitchMLError(message)
    if not submission.safe:
        submission.failure = error
        submission.future.set_exception(error)
        submission.done.set()
        return
    with torch.no_grad():
        tensor = submission.tensor
        if tensor.is_floating_point() or tensor.is_complex():
            tensor.fill_(float("nan"))
        elif tensor.dtype != torch.bool:
            tensor.fill_(torch.iinfo(tensor.dtype).min)
    with _lock:
        submission.failure = error
        thread = submission.raise_thread
    if thread is not None:
        _raise_in(thread, submission, message)
    submission.done.set()
    submission.future.set_result(submission.result)
