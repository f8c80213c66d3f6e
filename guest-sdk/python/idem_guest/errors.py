"""The SDK's error type."""

__all__ = ["IdemError"]


class IdemError(Exception):
    """A transform error with a message for the user. Raise it (or any
    exception) from ``open``/``push``/``finish`` to fail the run; the host
    shows the message as is."""
