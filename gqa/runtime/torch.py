"""PyTorch helpers: model and optimizer state through the atomic save.

Importing this module does not import torch; calling a helper does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .checkpoint import Checkpointer

TRAINING_STATE_FILE = "training_state.pt"


def save_training_state(
    ckpt: Checkpointer, model: Any, optimizer: Any | None, step: int, **extra: Any
) -> Path:
    """Save model and optimizer state dicts, `step` and `extra` as one checkpoint."""
    import torch

    payload = {
        "model": model.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "step": step,
        "extra": extra,
    }
    return ckpt.save(lambda d: torch.save(payload, d / TRAINING_STATE_FILE), step=step)


def load_training_state(
    ckpt: Checkpointer,
    model: Any,
    optimizer: Any | None = None,
    *,
    map_location: Any = "cpu",
    weights_only: bool = True,
) -> dict[str, Any] | None:
    """Restore model (and optimizer) from the latest checkpoint.

    Returns {"step": ..., **extra}, or None when there is no checkpoint yet.
    Pass weights_only=False if `extra` holds objects other than tensors and
    plain Python values (only for checkpoints you trust).
    """
    import torch

    path = ckpt.latest()
    if path is None:
        return None
    payload = torch.load(
        path / TRAINING_STATE_FILE, map_location=map_location, weights_only=weights_only
    )
    model.load_state_dict(payload["model"])
    if optimizer is not None and payload["optimizer"] is not None:
        optimizer.load_state_dict(payload["optimizer"])
    return {"step": payload["step"], **payload["extra"]}
