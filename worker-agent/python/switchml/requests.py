"""What the client keeps per tensor and per request in flight, the tensors it takes, and how a failure is reported."""

import ctypes

import torch

from .errors import SwitchMLError

__all__ = ["WIRE_DTYPE", "Request", "Submission", "check_tensor", "fail_submission"]

OPS = ("sum", "average")
# float16 and bfloat16 widen to float32 exactly in the shared memory, and the sum is rounded back once
WIRE_DTYPE = {torch.float32: "float32", torch.float16: "float32", torch.bfloat16: "float32", torch.int32: "int32"}
_SUPPORTED = "float32, float16, bfloat16 and int32"


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


class Submission:
    """One tensor's all-reduce: its pieces in flight and the future completed when the last is back."""

    __slots__ = ("tensor", "flat", "op", "future", "pieces_left", "error", "stream", "result", "raise_thread")

    def __init__(self, tensor, flat, op, pieces, stream, result, raise_thread):
        self.tensor = tensor
        self.flat = flat
        self.op = op
        self.future = torch.futures.Future()
        self.pieces_left = pieces
        self.error = None
        self.stream = stream
        self.result = result
        self.raise_thread = raise_thread


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


_raised = set()


def fail_submission(submission, message):
    """Fail one tensor's all-reduce: its future, or (raise_thread set) its caller thread."""
    if submission.raise_thread is None:
        submission.future.set_exception(SwitchMLError(message))
        return
    with torch.no_grad():
        if submission.tensor.is_floating_point():
            submission.tensor.fill_(float("nan"))
    key = (submission.raise_thread, message)
    if key not in _raised:
        _raised.add(key)
        error = type("SwitchMLError", (SwitchMLError,), {"__init__": lambda self: SwitchMLError.__init__(self, message),
                                                          "__module__": SwitchMLError.__module__})
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(submission.raise_thread), ctypes.py_object(error))
    submission.future.set_result(submission.result)
