"""PyTorch bridge to a SwitchML software aggregator.

Each training process (one rank) talks to its own local worker agent, started with
``switchml worker serve``. The agent has already joined the job on the appliance; this package
sends it requests over a Unix-domain socket and passes tensor data through a shared-memory file
that both sides map, so tensors never cross the socket.

Typical use with DistributedDataParallel::

    import switchml
    client = switchml.Client()                      # $SWITCHML_SOCKET, or a path
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(client, switchml.ddp_comm_hook)

or directly::

    client.all_reduce(tensor, op="average")         # in place, float CPU tensor

Pure Python (standard library and torch only).
"""

from .client import Client, SwitchMLError, ddp_comm_hook

__all__ = ["Client", "SwitchMLError", "ddp_comm_hook"]
