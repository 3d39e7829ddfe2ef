"""gqa: a virtual queue for GPU training jobs."""

__version__ = "0.1.0"
