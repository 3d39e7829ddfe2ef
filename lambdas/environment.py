"""The functions' configuration: every setting a Lambda function reads from
its environment is read here, under one name and one format for all of them.

A setting that is missing or malformed raises MisconfiguredFunction naming
the variable and what it should hold, from the function's first use of it
(its cold start): a function deployed with a wrong setting fails at once and
says why, instead of working on the wrong tables or no GPUs.

The settings:
    GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE   the DynamoDB tables (every function)
    GQA_INTAKE_URLS          JSON {"high": url, "normal": url, "low": url}: the tier intake queues (api, trigger, admit)
    GQA_WAKEUP_QUEUE_URL     the dispatcher's wake-up queue (required by api; optional elsewhere)
    GQA_POOLS                JSON list of resources.Pool's fields (dispatch, api)
    GQA_JOB_DEFINITION       the Batch job definition (dispatch)
    GQA_IMAGES               JSON object, spec image -> job definition (dispatch; optional)
    GQA_CHECKPOINT_BUCKET    checkpoints and code bundles on S3 (dispatch; api: where code bundles are, and no
                             trigger may watch it; trigger: no trigger may watch it);
                             GQA_CHECKPOINT_PREFIX (optional, "checkpoints")
    GQA_CHECKPOINT_GRACE     seconds from SIGTERM to SIGKILL, added to Batch timeouts (dispatch; optional)
    GQA_MANIFEST_BUCKET      large bursts' key lists (trigger; optional, default GQA_CHECKPOINT_BUCKET;
                             api: no trigger may watch it)
    GQA_TRIGGER_BUCKETS      JSON list of the deployment's trigger buckets, each a name or {"name": ...,
                             "prefixes": [...]}: where triggers may watch (api, trigger; unset: nowhere)
    GQA_TRIGGER_TIMER_QUEUE_URL   the bursts' timer queue (trigger)
    GQA_ALERTS_TOPIC_ARN     the SNS topic alerts go to (budget; optional for admit: approval requests)
    GQA_NOTICES_TOPIC_ARN    the SNS topic job notices go to (reconcile, dispatch, api; optional: none sent)
    GQA_GPU_METRICS_NAMESPACE     where the jobs' GPUUtilization lives (budget; optional, "gqa")
    GQA_LOG_GROUP            the jobs' log group where a job definition names none (api; optional)
    GQA_KEEP_HISTORY_DAYS    days a finished job is kept after its end (api, admit, dispatch, reconcile; optional)
    GQA_ACCESS               JSON, services.access.AccessPolicy.from_json (api, trigger: a burst's owner is
                             judged as a caller is; optional)
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, overload

from gqa.adapters.aws.resources import Pool, pools_from_json
from gqa.adapters.aws.tables import TableNames
from gqa.models.priority import Priority
from gqa.models.trigger import TriggerPlaces, trigger_buckets_from_json
from gqa.services.access import AccessPolicy

CHECKPOINT_PREFIX = "checkpoints"
TIERS = tuple(p.value for p in Priority)


class MisconfiguredFunction(RuntimeError):
    """A setting the function needs is missing or malformed; the message names it."""


def required(name: str, what: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise MisconfiguredFunction(f"{name} is not set: it must hold {what}")
    return value


def optional(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or default


def keep_history() -> float | None:
    """GQA_KEEP_HISTORY_DAYS: how long a finished job is kept, in seconds (its
    item's TTL); unset: for good."""
    text = optional("GQA_KEEP_HISTORY_DAYS")
    if text is None:
        return None
    try:
        days = float(text)
    except ValueError:
        days = 0.0
    if not days > 0:
        raise MisconfiguredFunction(f"GQA_KEEP_HISTORY_DAYS must be a number of days > 0, got {text!r}")
    return days * 86_400


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise MisconfiguredFunction(f"{name} is not JSON: {text[:80]!r}") from None


def table_names() -> TableNames:
    return TableNames(jobs=required("GQA_JOBS_TABLE", "the jobs table's name"),
                      settings=required("GQA_SETTINGS_TABLE", "the settings table's name"),
                      ledger=required("GQA_LEDGER_TABLE", "the ledger table's name"))


def intake_urls() -> dict[int, str]:
    """GQA_INTAKE_URLS -> {tier rank: queue URL}."""
    raw = _json("GQA_INTAKE_URLS", required("GQA_INTAKE_URLS", 'JSON {"high": url, "normal": url, "low": url}'))
    if not isinstance(raw, dict) or set(raw) != set(TIERS) or not all(isinstance(u, str) and u for u in raw.values()):
        got = ", ".join(sorted(raw)) if isinstance(raw, dict) else type(raw).__name__
        raise MisconfiguredFunction(f"GQA_INTAKE_URLS must map each of {', '.join(TIERS)} to a queue URL "
                                    f"(got {got or 'nothing'})")
    return {Priority(tier).rank: url for tier, url in raw.items()}


@overload
def wakeup_url(*, needed: Literal[True]) -> str: ...
@overload
def wakeup_url(*, needed: bool = False) -> str | None: ...
def wakeup_url(*, needed: bool = False) -> str | None:
    """The dispatcher's wake-up queue; None where it is optional and not set."""
    if needed:
        return required("GQA_WAKEUP_QUEUE_URL", "the dispatcher's wake-up queue URL")
    return optional("GQA_WAKEUP_QUEUE_URL")


def pools() -> tuple[Pool, ...]:
    text = required("GQA_POOLS", 'a JSON list of pools, e.g. [{"gpu_type": "a10g", "spot": true, '
                                 '"max_gpus": 8, "price": 0.5}]')
    try:
        return pools_from_json(text)
    except ValueError as exc:
        raise MisconfiguredFunction(f"GQA_POOLS: {exc}") from None


def job_definition() -> str:
    return required("GQA_JOB_DEFINITION", "the Batch job definition jobs run with")


def images() -> dict[str, str]:
    """GQA_IMAGES: spec image -> job definition (none when unset)."""
    raw = _json("GQA_IMAGES", optional("GQA_IMAGES", "{}") or "{}")
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in raw.items()):
        raise MisconfiguredFunction("GQA_IMAGES must be a JSON object of image -> job definition name")
    return raw


def checkpoint_bucket() -> str:
    return required("GQA_CHECKPOINT_BUCKET", "the S3 bucket for checkpoints")


def checkpoint_prefix() -> str:
    return optional("GQA_CHECKPOINT_PREFIX", CHECKPOINT_PREFIX) or CHECKPOINT_PREFIX


def checkpoint_grace(default: int) -> int:
    """GQA_CHECKPOINT_GRACE: whole seconds, more than 0 (the deployment's compute.checkpoint_grace)."""
    text = optional("GQA_CHECKPOINT_GRACE")
    if text is None:
        return default
    try:
        seconds = int(text)
    except ValueError:
        seconds = 0
    if seconds <= 0:
        raise MisconfiguredFunction(f"GQA_CHECKPOINT_GRACE must be a whole number of seconds above 0, "
                                    f"got {text[:80]!r}")
    return seconds


def manifest_bucket() -> str | None:
    return optional("GQA_MANIFEST_BUCKET") or optional("GQA_CHECKPOINT_BUCKET")


def trigger_places() -> TriggerPlaces:
    """Where triggers may watch: GQA_TRIGGER_BUCKETS (unset: nowhere, and a refused trigger
    says the deployment lists no trigger buckets), never the checkpoint or manifest bucket."""
    text = optional("GQA_TRIGGER_BUCKETS")
    try:
        buckets = trigger_buckets_from_json(_json("GQA_TRIGGER_BUCKETS", text)) if text else ()
    except ValueError as exc:
        raise MisconfiguredFunction(f"GQA_TRIGGER_BUCKETS: {exc}") from None
    return TriggerPlaces.of(buckets, checkpoint_bucket=optional("GQA_CHECKPOINT_BUCKET"),
                            manifest_bucket=manifest_bucket())


def trigger_timer_url() -> str:
    return required("GQA_TRIGGER_TIMER_QUEUE_URL", "the trigger timer queue URL")


@overload
def alerts_topic(*, needed: Literal[True] = True) -> str: ...
@overload
def alerts_topic(*, needed: bool) -> str | None: ...
def alerts_topic(*, needed: bool = True) -> str | None:
    """The SNS topic alerts go to; None where it is optional and not set."""
    if needed:
        return required("GQA_ALERTS_TOPIC_ARN", "the SNS topic ARN alerts go to")
    return optional("GQA_ALERTS_TOPIC_ARN")


def notices_topic() -> str | None:
    """The SNS topic job notices go to; None: no notices are sent."""
    return optional("GQA_NOTICES_TOPIC_ARN")


def gpu_metrics_namespace(default: str) -> str:
    return optional("GQA_GPU_METRICS_NAMESPACE", default) or default


def log_group(default: str) -> str:
    return optional("GQA_LOG_GROUP", default) or default


def access() -> AccessPolicy:
    try:
        return AccessPolicy.from_json(optional("GQA_ACCESS"))
    except ValueError as exc:
        raise MisconfiguredFunction(f"GQA_ACCESS: {exc}") from None
