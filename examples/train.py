#!/usr/bin/env python3
#GQA --job-name=train-example
#GQA --gpus=1
#GQA --time=10m
"""A pretend training run that checkpoints and resumes through gqa.runtime.

Submit it with `gqa submit examples/train.py` (the #GQA lines above are its
submission options), or run it directly: `python examples/train.py`.
No GPU or framework needed: each step sleeps and reports a made-up loss.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

try:
    from gqa.runtime import Checkpointer, job
except ImportError:  # run from a checkout without gqa installed where the job's python runs
    # the checkout holding this file, or, as a job (which runs a copy of the script kept with the
    # job), the one it was submitted from: the job starts in the directory it was submitted from
    for base in (Path(__file__).resolve().parent.parent, Path.cwd(), *Path.cwd().parents):
        if (base / "gqa" / "runtime" / "__init__.py").is_file():
            sys.path.insert(0, str(base))
            break
    from gqa.runtime import Checkpointer, job


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="stop after this step")
    parser.add_argument("--step-seconds", type=float, default=0.1, help="sleep per step")
    parser.add_argument("--checkpoint-every", type=int, default=5, help="steps between saves")
    parser.add_argument(
        "--checkpoint-dir", default=None, help="default: GQA_CHECKPOINT_DIR, else ./checkpoints"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 0 or args.checkpoint_every < 1 or args.step_seconds < 0:
        parser.error("--steps and --step-seconds must be >= 0, --checkpoint-every >= 1")
    return args


def fake_loss(step: int, seed: int) -> float:
    # Noise derived from (seed, step), so a resumed run repeats the same curve.
    noise = random.Random(seed * 1_000_003 + step).random()
    return 2.0 * math.exp(-step / 50) + 0.05 * noise


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ctx = job()
    ckpt = Checkpointer(args.checkpoint_dir, keep=3)
    preempt = ckpt.on_preempt()  # SIGTERM only raises a flag; we save below

    state = ckpt.load_state()
    if state is None:
        state = {"step": 0, "seed": args.seed}
        print(f"starting fresh (job {ctx.job_id or '-'}, attempt {ctx.attempt})", flush=True)
    else:
        print(f"resumed from step {state['step']} (attempt {ctx.attempt})", flush=True)
    saved_step = state["step"]

    while state["step"] < args.steps:
        time.sleep(args.step_seconds)
        state["step"] += 1
        loss = fake_loss(state["step"], state["seed"])
        print(f"step {state['step']} loss {loss:.4f}", flush=True)

        if state["step"] % args.checkpoint_every == 0 or preempt.requested:
            ckpt.save_state(state)
            saved_step = state["step"]
        if preempt.requested:
            print(f"preempted: saved step {saved_step}, exiting", flush=True)
            preempt.exit()  # 143: the queue requeues the job and it resumes here

    if saved_step != state["step"]:
        ckpt.save_state(state)
    print(f"done at step {state['step']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
