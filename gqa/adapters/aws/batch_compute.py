"""Compute on AWS Batch: each attempt is one Batch job on the job queue of the
pool its GPUs belong to (pools in resources.py).

GPU indices are virtual slots. The inventory numbers each pool's slots
0..max_gpus-1 consecutively across pools, in the order the pools are given
(a10g-spot 0-7, a10g-ondemand 8-15, ...), so the scheduler counts and gangs
GPUs per pool (a pool is its Gpu objects' (type, spot)). Batch then places the
container on an instance with that many GPUs and exposes them to it itself;
no CUDA_VISIBLE_DEVICES is set here.

What a launch hands Batch, and why:
- the GPU count, and vCPUs and memory from the spec; without them
  `cpus_per_gpu` (4) vCPUs and `memory_per_gpu` (14 GiB) per GPU, which fit
  the common one-GPU instances (g4dn/g5.xlarge: 4 vCPUs, 16 GiB of which the
  ECS agent keeps some); a CPU-only job asks for no GPU and runs in the
  cheapest on-demand pool, an exclusive one for every vCPU of an instance
  (batch_resources.py);
- the spec's argv as the command, and its env plus GQA_JOB_ID, GQA_ATTEMPT,
  GQA_CHECKPOINT_URI, GQA_RESUME_FROM and GQA_ARRAY_INDEX; not the
  submitter's shell environment, which means nothing inside a container;
- the SLURM_* variables that do not depend on the instance (models/slurm_env.py:
  job id, name, account, tasks, CPUs and thread counts, an array task's
  index and span); the job's runtime adds the host's (node name, start);
- for a spec with `code`, GQA_CODE_URI (its bundle in the checkpoint bucket)
  and the command behind the fetcher (gqa.models.code.launch_command), which
  unpacks the bundle and execs the argv in it on every attempt;
- a timeout of the attempt's limit (its wall time, or what is left of its
  GPU-hour budget, whichever is first) plus the checkpoint grace, at least
  Batch's minimum of 60 s: a backstop, should the control plane not stop it;
- one attempt: gqa decides retries, from its own exit rules;
- tags gqa:team, gqa:job-id (and owner, attempt, pool, and the spec's valid
  tags), propagated to the ECS task, for cost allocation.

A SubmitJob that failed on Batch's side, or whose answer never came, may
still have created the job: launch() then raises LaunchUncertain (never a
plain BackendUnavailable, which says Batch surely holds nothing), and the
job waits for find() (the LaunchLookup port): ListJobs' JOB_NAME filter on
the pool's queue, by the gqa-<id>-<attempt>- prefix of job_name(). That
holds only if SubmitJob is tried once: the client must be built with
CLIENT_CONFIG (botocore's own retries off), since botocore would repeat it
after a 5xx or a lost answer, unseen, and Batch, which takes no client
token, would run both jobs. The calls safe to repeat are retried here.

The port's Launched carries pid 0 (there is no process of ours) and the Batch
job id as its token; the services store it as the job's proc_token, and
terminate, alive and reap read it from there. A submitted job may wait
RUNNABLE for an instance for hours, so a launch is not a start
(`launch_is_start`): the job stays STARTING until Batch's RUNNING event, and
terminate() stops it in either state.

alive() and reap() share one DescribeJobs answer for
`status_ttl` seconds of the injected clock, and prime() reads a hundred jobs
per call, so a reconcile pass costs one call per hundred running jobs.

The image is the job definition's: Batch cannot override it per job. A spec
that names an image runs only if `images` maps it to a job definition. The
spec's workdir is not used either (the image's working directory applies).
Batch's stop (TerminateJob) sends SIGTERM, then SIGKILL after the ECS agent's
ECS_CONTAINER_STOP_TIMEOUT (a compute-environment setting), so `grace` cannot
be chosen per job here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from ...models.batch_events import BatchJobEvent, classify
from ...models.code import URI_ENV, launch_command, uri_of

from ...models.errors import BackendUnavailable, LaunchFailed, LaunchUncertain, NotFound
from ...models.job import JobRecord
from ...models.slurm_env import attempt_env, slurm_env
from ...ports import Checkpoints, Clock, Exit, FoundLaunch, Inventory, Launched
from ...scheduling.snapshot import Gpu
from .batch_payload import GQA_TAGS, MAX_TAGS, kept_tags
from .batch_resources import cpu_pool, requirements
from .errors import SERVICE_TRANSIENT, Retrying, code_of, is_service_throttling
# what DescribeJobs and the state-change events say are read in one place; re-exported for the callers here
from .job_events import BatchJob, MalformedEvent, batch_job_from, event_from, parse_job_name  # noqa: F401
from .resources import Pool

ACTIVE = frozenset({"SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING"})
MIN_TIMEOUT = 60                 # Batch refuses a shorter attemptDurationSeconds
MiB = 1024 * 1024
# a job definition's tags are read again after this long: a deployment that changes the stack's
# tags registers a new revision, which a warm container would otherwise never see (a job with
# nearly 50 tags launched meanwhile could pass the limit); one call a container every 5 minutes
DEFINITION_TAGS_TTL = 300.0
# a job with at most this many tags of its own (gqa's five besides) never asks Batch for its definition's:
# it leaves room for 10 of them (a deployment's stack tags are a few), and most jobs launch without the call
FEW_TAGS = MAX_TAGS - GQA_TAGS - 10
_NAME_JUNK = re.compile(r"[^A-Za-z0-9_-]")
# the Batch client's configuration: botocore retries nothing, so each call is retried by its own rule below
CLIENT_CONFIG = Config(retries={"total_max_attempts": 1})


class BatchCompute:
    holds_launches = False   # a submitted job runs when Batch finds it an instance: the claim is written before
    launch_is_start = False  # SubmitJob queues it (RUNNABLE); the attempt starts at Batch's RUNNING event

    def __init__(self, client: Any, pools: Iterable[Pool], job_definition: str, checkpoints: Checkpoints,
                 clock: Clock, *, images: Mapping[str, str] | None = None, cpus_per_gpu: int = 4,
                 memory_per_gpu: int = 14 * 1024, default_grace: int = 10, status_ttl: float = 2.0,
                 code_bucket: str | None = None, attempts: int = 5, **retry: Any):
        self.client = client
        self.pools = tuple(pools)
        self.job_definition = job_definition
        self.checkpoints = checkpoints
        self.clock = clock
        self.images = dict(images or {})
        self.cpus_per_gpu = cpus_per_gpu
        self.memory_per_gpu = memory_per_gpu      # MiB
        self.default_grace = default_grace
        self.status_ttl = status_ttl
        self.code_bucket = code_bucket            # where code bundles are: the checkpoint bucket
        self._inventory, self._pool_of = _slots(self.pools)
        # SubmitJob is not idempotent (Batch takes no client token): retry it only when
        # Batch refused it for rate, never after an error that may follow a created job
        self._submit = Retrying.for_service(client, "Batch", {"ClientException": LaunchFailed},
                                            transient=is_service_throttling, attempts=attempts, **retry)
        # Batch says ClientException for every client-side problem; for TerminateJob
        # and DescribeJobs the one the request can have is an unknown job id. These
        # calls are safe to repeat, also after an answer that never came
        self._call = Retrying.for_service(client, "Batch", {"ClientException": NotFound}, attempts=attempts,
                                          unanswered=True, **retry)
        self._seen: dict[str, tuple[float, BatchJob | None]] = {}   # Batch job id -> (read at, what was read)
        self._definition_tags: dict[str, tuple[float, int]] = {}   # job definition -> (read at, its tags)

    # -- Compute port -----------------------------------------------------------------------------------
    def inventory(self) -> Inventory:
        return self._inventory

    def launch(self, job: JobRecord, gpus: tuple[int, ...], attempt: int) -> Launched:
        pool = self._pool(gpus) if gpus or job.gpus else cpu_pool(self.pools)
        spec = job.spec
        if pool.instance_gpus is not None and len(gpus) > pool.instance_gpus:
            raise LaunchFailed(f"asks for {len(gpus)} GPUs; the instances of pool {pool.name} have at most "
                               f"{pool.instance_gpus} (a container runs on one instance)")
        definition = self.job_definition
        if spec.image is not None:
            if spec.image not in self.images:
                raise LaunchFailed(f"no job definition runs image {spec.image}; known images: "
                                   f"{', '.join(sorted(self.images)) or 'none'}")
            definition = self.images[spec.image]
        request: dict[str, Any] = {
            "jobName": job_name(job, attempt),
            "jobQueue": pool.queue_name,
            "jobDefinition": definition,
            "containerOverrides": {
                "command": launch_command(spec),
                "environment": [{"name": k, "value": v} for k, v in self.environment(job, attempt).items()],
                "resourceRequirements": self.resources(job, len(gpus), pool),
            },
            "retryStrategy": {"attempts": 1},
            "tags": tags(job, attempt, pool,
                         MAX_TAGS if len(spec.tags) <= FEW_TAGS else self._tag_room(definition)),
            "propagateTags": True,
        }
        timeout = self.timeout(job, len(gpus))
        if timeout is not None:
            request["timeout"] = {"attemptDurationSeconds": timeout}
        try:
            out = self._submit("SubmitJob", **request)
        except BackendUnavailable as exc:
            if not _maybe_created(exc):
                raise
            raise LaunchUncertain(f"Batch may or may not hold attempt {attempt} of job {job.id}: {exc}") from exc
        return Launched(pid=0, token=out["jobId"])

    def _tag_room(self, definition: str) -> int:
        """How many tags a job on this definition may carry: Batch propagates the definition's to
        the job's task and fails a job whose tags and its definition's pass 50, after accepting it
        (the deployment's stack tags, `cdk deploy --tags`'s, reach the definition). Read once per
        definition every DEFINITION_TAGS_TTL: by name, its latest active revision, the one SubmitJob runs."""
        now = self.clock.now()
        read = self._definition_tags.get(definition)
        if read is None or now - read[0] >= DEFINITION_TAGS_TTL:
            asked: dict[str, Any] = ({"jobDefinitions": [definition]} if ":" in definition
                                     else {"jobDefinitionName": definition, "status": "ACTIVE"})
            revisions: list[dict[str, Any]] = []
            try:
                while True:
                    page = self._call("DescribeJobDefinitions", **asked)
                    revisions += page.get("jobDefinitions") or []
                    if not page.get("nextToken"):
                        break
                    asked["nextToken"] = page["nextToken"]
            except NotFound:
                pass    # an invalid name: SubmitJob says so, with the launch
            latest = max(revisions, key=lambda d: int(d.get("revision", 0)), default={})
            read = self._definition_tags[definition] = (now, len(latest.get("tags") or {}))
        return MAX_TAGS - read[1]

    def terminate(self, job: JobRecord, grace: float) -> None:
        if not job.proc_token:
            return
        self._seen.pop(job.proc_token, None)
        try:
            # TerminateJob stops a job in any state (CancelJob only before it starts)
            self._call("TerminateJob", jobId=job.proc_token, reason=f"gqa: {job.kill_reason or 'stop requested'}")
        except NotFound:
            pass   # a job Batch no longer knows has nothing left to stop

    def alive(self, job: JobRecord) -> bool:
        described = self._cached(job)
        return described is not None and described.status in ACTIVE

    def ended(self, job: JobRecord) -> bool:
        """False: Batch's events report an end (asking per stop would cost a call each)."""
        return False

    def reap(self, job: JobRecord) -> Exit | None:
        described = self._cached(job)
        if described is None or described.status not in ("SUCCEEDED", "FAILED"):
            return None
        kind, detail = classify(described.status, described.status_reason, described.exit_code,
                                described.container_reason)
        code = 0 if described.status == "SUCCEEDED" else described.exit_code
        return Exit(job.id, job.attempts, code, None, kind, detail)

    def cleanup(self, job: JobRecord) -> None:
        """Nothing: Batch removes what an ended job leaves."""

    def release(self, job_ids: list[str]) -> None:
        """Nothing: a Batch job runs once submitted (the repair finds launches never recorded)."""

    def abandon(self, job_ids: list[str]) -> None:
        """Nothing: see release()."""

    def forget(self, job: JobRecord) -> None:
        """Nothing: Batch keeps ended jobs for days."""

    # -- LaunchLookup port -------------------------------------------------------------------------------
    def find(self, job: JobRecord, attempt: int) -> FoundLaunch | None:
        """The Batch job of this attempt, by its name (ListJobs' JOB_NAME filter,
        which lists jobs in every status) on the queue of the pool its GPUs are
        in (every pool's queue when they name none). Batch keeps ended jobs for
        days, far beyond the grace after which the services look."""
        queues = list(dict.fromkeys(self._pool_of[i].queue_name for i in job.assigned if i in self._pool_of))
        prefix = f"gqa-{job.id}-{attempt}-*"
        found: list[dict[str, Any]] = []
        for queue in queues or list(dict.fromkeys(p.queue_name for p in self.pools)):
            request: dict[str, Any] = {"jobQueue": queue, "filters": [{"name": "JOB_NAME", "values": [prefix]}]}
            while True:
                out = self._call("ListJobs", **request)
                # the filter is a case-insensitive prefix: keep only names that parse back to this attempt
                found += [j for j in out.get("jobSummaryList", []) if parse_job_name(j["jobName"]) == (job.id, attempt)]
                if not out.get("nextToken"):
                    break
                request["nextToken"] = out["nextToken"]
        if not found:
            return None
        return found_launch(job, attempt, max(found, key=lambda j: j.get("createdAt", 0)))

    def prime(self, jobs: Iterable[JobRecord]) -> None:
        """Read many attempts at once (DescribeJobs takes 100 ids), so alive()
        and reap() on them cost no call until status_ttl passes."""
        self._describe([j.proc_token for j in jobs if j.proc_token])

    # -- AttemptStatus port --------------------------------------------------------------------------------
    def attempts_now(self, jobs: Iterable[JobRecord]) -> dict[str, BatchJobEvent | None]:
        """Each job's recorded attempt as DescribeJobs describes it now (a
        hundred a call), read as the state-change event Batch would send (the
        detail of one has DescribeJobs' shape); None for a Batch job Batch no
        longer knows. A job without a recorded Batch job, or whose description
        cannot be read as one of gqa's attempts, is left out."""
        recorded = [(j, j.proc_token) for j in jobs if j.proc_token]
        details = self._describe([token for _, token in recorded])
        now = self.clock.now()
        out: dict[str, BatchJobEvent | None] = {}
        for job, token in recorded:
            detail = details.get(token)
            if detail is None:
                out[job.id] = None
                continue
            try:
                event = event_from(detail, received=now)
            except MalformedEvent:   # an answer without a status cannot be judged: ask again later
                continue
            if event is not None and event.job_id == job.id:
                out[job.id] = event
        return out

    # -- the request ---------------------------------------------------------------------------------------
    def environment(self, job: JobRecord, attempt: int) -> dict[str, str]:
        # what Batch gives the container: the CPUs resources() asks for
        slurm = slurm_env(job, attempt, cpus_on_node=job.cpus or self.cpus_per_gpu * job.gpus or None)
        env = attempt_env({}, slurm, job.spec.env)
        env.update(job.extra_env)
        reserved = sorted(k for k in env if k.startswith("AWS_BATCH"))
        if reserved:   # Batch refuses these names; say which, rather than a bare ClientException
            raise LaunchFailed(f"environment variables starting with AWS_BATCH are Batch's own: {', '.join(reserved)}")
        env.update({
            "GQA_JOB_ID": job.id,
            "GQA_ATTEMPT": str(attempt),
            "GQA_CHECKPOINT_URI": self.checkpoints.location(job.id),
            # a first attempt has nothing to resume (ids are never reused), so no lookup for it
            "GQA_RESUME_FROM": (self.checkpoints.latest(job.id) or "") if attempt > 1 else "",
        })
        if job.array_index is not None:
            env["GQA_ARRAY_INDEX"] = str(job.array_index)
        warning, limit = job.spec.limits.signal, job.attempt_wall_time
        if warning is not None and limit:
            # Batch only kills at the timeout: the job's runtime (runtime/job_process.py) sends the
            # warning, counting the attempt's wall time from its own start
            env.update({"GQA_WARN_SIGNAL": warning, "GQA_WALL_SECONDS": str(int(limit))})
        if job.spec.code is not None:
            if self.code_bucket is None:
                raise LaunchFailed(f"the job's code {job.spec.code} needs a bucket for code bundles; this "
                                   "deployment's dispatch function names none")
            env[URI_ENV] = uri_of(self.code_bucket, job.spec.code)
        return env

    def resources(self, job: JobRecord, gpus: int, pool: Pool) -> list[dict[str, str]]:
        return requirements(job, gpus, pool, cpus_per_gpu=self.cpus_per_gpu, memory_per_gpu=self.memory_per_gpu)

    def timeout(self, job: JobRecord, gpus: int) -> int | None:
        limits = []
        if job.attempt_wall_time:
            limits.append(float(job.attempt_wall_time))
        budget = job.spec.limits.max_gpu_hours
        if budget and gpus:   # a CPU-only job uses no GPU-hours
            limits.append(max(0.0, budget * 3600 - job.gpu_seconds) / max(1, gpus))
        if not limits:
            return None
        grace = job.spec.checkpoint.grace or self.default_grace
        return max(MIN_TIMEOUT, math.ceil(min(limits) + grace))

    # -- helpers -------------------------------------------------------------------------------------------
    def _pool(self, gpus: tuple[int, ...]) -> Pool:
        if not gpus:
            raise LaunchFailed("no GPUs assigned")
        unknown = [i for i in gpus if i not in self._pool_of]
        if unknown:
            raise LaunchFailed(f"GPU slots {unknown} belong to no pool")
        pools = {self._pool_of[i].name for i in gpus}
        if len(pools) > 1:
            raise LaunchFailed(f"GPU slots {list(gpus)} span pools {sorted(pools)}; a job runs in one")
        return self._pool_of[gpus[0]]

    def _describe(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """DescribeJobs on these Batch job ids, a hundred a call: the jobs Batch
        knows, by id. What was read is kept for alive() and reap()."""
        now = self.clock.now()
        self._seen = {k: v for k, v in self._seen.items() if now - v[0] <= self.status_ttl}   # stay small
        known: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), 100):
            chunk = ids[start:start + 100]
            found = {d["jobId"]: d for d in self._call("DescribeJobs", jobs=chunk).get("jobs", [])}
            now = self.clock.now()
            for batch_id in chunk:
                self._seen[batch_id] = (now, batch_job_from(found[batch_id]) if batch_id in found else None)
            known.update(found)
        return known

    def _cached(self, job: JobRecord) -> BatchJob | None:
        if not job.proc_token:
            return None
        seen = self._seen.get(job.proc_token)
        if seen is None or self.clock.now() - seen[0] > self.status_ttl:
            self.prime([job])
            seen = self._seen[job.proc_token]
        return seen[1]


def inventory_of(pools: Iterable[Pool]) -> Inventory:
    """The GPUs the pools hold, as BatchCompute.inventory() reports them."""
    return _slots(tuple(pools))[0]


def _slots(pools: tuple[Pool, ...]) -> tuple[Inventory, dict[int, Pool]]:
    by_kind: dict[tuple[str, bool], str] = {}
    gpus: list[Gpu] = []
    pool_of: dict[int, Pool] = {}
    for pool in pools:
        kind = (pool.gpu_type, pool.spot)
        if kind in by_kind:   # the scheduler tells pools apart by (type, spot) alone
            raise ValueError(f"pools {by_kind[kind]} and {pool.name} are both {pool.gpu_type} "
                             f"{'spot' if pool.spot else 'on demand'}")
        by_kind[kind] = pool.name
        for _ in range(pool.max_gpus):
            pool_of[len(gpus)] = pool
            gpus.append(Gpu(len(gpus), pool.gpu_type, pool.price, pool.spot))
    return Inventory(tuple(gpus)), pool_of


def found_launch(job: JobRecord, attempt: int, summary: Mapping[str, Any]) -> FoundLaunch:
    """A ListJobs job summary as the LaunchLookup port reports it (times are epoch milliseconds there)."""
    def seconds(name: str) -> float | None:
        return summary[name] / 1000 if summary.get(name) is not None else None
    ended = None
    if summary["status"] in ("SUCCEEDED", "FAILED"):
        described = batch_job_from(summary)
        kind, detail = classify(described.status, described.status_reason, described.exit_code,
                                described.container_reason)
        code = 0 if described.status == "SUCCEEDED" else described.exit_code
        ended = Exit(job.id, attempt, code, None, kind, detail)
    return FoundLaunch(Launched(pid=0, token=summary["jobId"]), seconds("createdAt"), seconds("startedAt"), ended,
                       seconds("stoppedAt"))


def _maybe_created(error: BackendUnavailable) -> bool:
    """After SubmitJob failed: may Batch have created the job? Not when it refused
    the request (for rate, or for the credentials); maybe when it failed on its
    side or its answer never arrived."""
    cause = error.__cause__
    if isinstance(cause, ClientError):
        return code_of(cause) in SERVICE_TRANSIENT and not is_service_throttling(cause)
    return cause is not None


def job_name(job: JobRecord, attempt: int) -> str:
    """Batch's rule: up to 128 letters, digits, hyphens and underscores. It
    starts with gqa-<id>-<attempt>- (ids have no hyphen), so it never starts
    with a hyphen, the id survives the cut, and ListJobs' JOB_NAME filter
    `gqa-12-3-*` finds attempt 3 of job 12 (a launch whose record was lost)."""
    return _NAME_JUNK.sub("-", f"gqa-{job.id}-{attempt}-{job.name}")[:128]


def tags(job: JobRecord, attempt: int, pool: Pool, room: int = MAX_TAGS) -> dict[str, str]:
    """gqa's own tags, then as many of the spec's as `room` (the tags the job may carry) leaves."""
    out = {"gqa:team": job.team, "gqa:job-id": job.id, "gqa:owner": job.owner,
           "gqa:attempt": str(attempt), "gqa:pool": pool.name}
    return out | kept_tags(job.spec.tags, room - len(out))
