"""A job whose script runs two python stages, each saving every step, requeued
mid-way by a real daemon: each stage of each attempt resumes from the newest
checkpoint, not from where the attempt started (GQA_RESUME_FROM)."""

import shlex
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e
PY = sys.executable
FIRST, LAST = 30, 80   # stage 1 trains to step 30, stage 2 on to 80

STAGE = textwrap.dedent(
    """
    import sys, time
    from gqa.runtime import Checkpointer, job

    stage, target, record = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ckpt = Checkpointer(keep=1000)
    preempt = ckpt.on_preempt()
    state = ckpt.load_state() or {"step": 0}
    with open(record, "a") as f:
        f.write(f"{job().attempt} {stage} {state['step']}\\n")
    while state["step"] < target:
        time.sleep(0.1)
        state["step"] += 1
        ckpt.save_state(state)
        print(f"stage {stage} step {state['step']}", flush=True)
        if preempt.requested:
            preempt.exit()
    """
)


def test_each_stage_of_a_requeued_job_resumes_from_the_newest(queue, tmp_path):
    script, record = tmp_path / "stage.py", tmp_path / "resumes"
    script.write_text(STAGE)

    def stage(n: int, target: int) -> str:
        return shlex.join([PY, str(script), str(n), str(target), str(record)])

    [job_id] = queue.submit(["bash", "-c", f"{stage(1, FIRST)} || exit $?; {stage(2, LAST)}"])
    queue.wait_log(job_id, "stage 1 step 10\n")
    queue.backend.control().requeue([job_id])   # attempt 1, in stage 1
    queue.wait_log(job_id, "stage 2 step 40\n", timeout=30)
    queue.backend.control().requeue([job_id])   # attempt 2, in stage 2
    job = queue.wait(job_id, timeout=60)

    assert job.state.value == "SUCCEEDED", queue.log(job_id)
    assert (job.attempts, job.error_retries, job.interruptions) == (3, 0, 2)
    resumes = [tuple(int(x) for x in line.split()) for line in record.read_text().splitlines()]
    (a1, s1, at1), (a2, s2, at2), (a3, s3, at3), (a4, s4, at4), (a5, s5, at5) = resumes
    assert [(a1, s1), (a2, s2), (a3, s3), (a4, s4), (a5, s5)] == [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert at1 == 0 and 10 <= at2 < FIRST          # attempt 2 starts where attempt 1 stopped
    assert at3 == FIRST                             # its stage 2: from stage 1's last save, not at2
    assert 40 <= at4 == at5 < LAST                  # attempt 3: both stages from the newest
    # every step saved once: nothing was trained twice, `latest` never went back
    checkpoints = queue.home / "checkpoints" / job_id
    assert sorted(p.name for p in checkpoints.iterdir() if not p.name.startswith(".")) == sorted(
        [f"ckpt-{step}" for step in range(1, LAST + 1)] + ["latest"])
    assert (checkpoints / "latest").read_text().strip() == f"ckpt-{LAST}"
