"""Imported inside training jobs: job context, atomic checkpoints, SIGTERM.

Standard library only, and nothing else from gqa, so it can be shipped into
any job container. PyTorch helpers live in `gqa.runtime.torch`.

    from gqa.runtime import Checkpointer

    ckpt = Checkpointer()
    preempt = ckpt.on_preempt()
    state = ckpt.load_state() or {"step": 0}
    while state["step"] < total:
        state["step"] += 1
        ...
        if state["step"] % 100 == 0 or preempt.requested:
            ckpt.save_state(state)
        if preempt.requested:
            preempt.exit()  # 143
"""

from .checkpoint import Checkpointer
from .context import JobContext, job
from .gpu_metrics import GpuSampler, start_gpu_sampler
from .signals import EXIT_CODE, Preemption, install_sigterm_handler
from .storage import CheckpointStorage, LocalStorage

__all__ = [
    "EXIT_CODE",
    "CheckpointStorage",
    "Checkpointer",
    "GpuSampler",
    "JobContext",
    "LocalStorage",
    "Preemption",
    "install_sigterm_handler",
    "job",
    "start_gpu_sampler",
]
