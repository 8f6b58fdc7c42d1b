"""The package's exception."""

__all__ = ["SwitchMLError"]


class SwitchMLError(RuntimeError):
    """The agent refused or failed a request, or went away.

    ``str(error)`` is the agent's message, for example the appliance's account of a rank whose
    control connection dropped.
    """
