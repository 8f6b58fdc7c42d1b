"""SwitchML for PyTorch: a c10d backend and a client of the local SwitchML worker agent.

One line makes a DDP script use the appliance::

    import switchml                                  # registers backend "switchml"
    torch.distributed.init_process_group("switchml") # under torchrun; starts this rank's agent

SUM and AVG all-reduces of float32, float16, bfloat16 and int32 tensors go through the appliance,
asynchronously (DDP's gradient buckets overlap the backward pass); SUM/AVG of float64, int64 and
the other dtypes, exact, and every other collective go to an inner Gloo group. Configuration: ``SWITCHML_*`` variables or ``pg_options`` (see
:mod:`switchml.config`). ``switchml.stats()`` returns the agent's counters.

Lower level, with an agent you started yourself (``switchml worker serve``)::

    client = switchml.Client()                       # $SWITCHML_SOCKET, or a path
    client.all_reduce(tensor, op="average")          # in place; all_reduce_async returns a Future
    ddp.register_comm_hook(client, switchml.ddp_comm_hook)

Pure Python (standard library and torch only); tested with torch 1.13 on CPU. CUDA tensors are
accepted (staged through the agent's shared memory) but untested.
"""

from .client import Client, SwitchMLError, ddp_comm_hook
from .backend import ProcessGroupSwitchML, current, register

__all__ = ["Client", "SwitchMLError", "ddp_comm_hook", "ProcessGroupSwitchML", "stats", "process_group"]


def process_group():
    """The live switchml process group of this process (``init_process_group(backend="switchml")``)."""
    group = current()
    if group is None:
        raise SwitchMLError("no switchml process group: call torch.distributed.init_process_group('switchml') first")
    return group


def stats():
    """Counters of this rank's agent: all-reduces, packets sent and received, retransmissions, RTT, ..."""
    return process_group().stats()


register()
