"""The queue's dashboard and alarms, built on the metrics the functions
already emit (gqa/services/telemetry.py, README "Metrics and
configuration"): namespace gqa, the dimension `service` = gqa-<function>,
and for some one more. A CloudWatch metric is its name plus ALL its
dimensions, so every metric here names exactly the set its emitter writes.

The reconcile function's outcome metrics (JobsFailed, SpotReclaims, Retries,
...) are also emitted by the dispatch function for attempts whose Batch
events were lost: each figure here is the sum of the two.

Every alarm notifies the alerts topic. Missing data is chosen per alarm:
a function that did not run, a queue SQS stopped reporting because it is
idle, or a team that spent nothing, is not trouble in itself, except where
the alarm says otherwise."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from gqa.models.deployment import Deployment
from gqa.models.spec import Priority
from gqa.services.telemetry import RETRY_KINDS, pool_name

from .queues import Queues

NAMESPACE = "gqa"
PERIOD = cdk.Duration.minutes(5)
TIERS = {p.rank: p.value for p in Priority}

# -- alarm thresholds -----------------------------------------------------------------------------
PENDING_TOO_LONG = 4 * 3600          # seconds the oldest queued job may wait (the budget watch's default too)
FAILURE_RATE = 20                    # percent of the jobs that ended in an hour
FAILURE_MIN_JOBS = 10                # fewer endings in the hour say nothing about a rate
BUDGET_THRESHOLDS = (80, 100)        # percent of a team's monthly budget
IDLE_PERIODS = 6                     # 5-minute periods of free GPUs while jobs wait: 30 minutes
DURATION_PERCENTILE = "p95"


def service(function: str) -> str:
    """The `service` dimension of a function's metrics (its Powertools service name)."""
    return f"gqa-{function}"


def gqa_metric(name: str, function: str, statistic: str = "Sum", *, label: str | None = None,
               period: cdk.Duration = PERIOD, **dimensions: str) -> cw.Metric:
    return cw.Metric(namespace=NAMESPACE, metric_name=name, statistic=statistic, period=period,
                     dimensions_map={"service": service(function), **dimensions}, label=label)


def settled(name: str, *, label: str | None = None, period: cdk.Duration = PERIOD,
            **dimensions: str) -> cw.MathExpression:
    """An outcome metric from both its emitters (reconcile, and dispatch for lost events), gaps as 0."""
    # a metric's id must be unique in a widget or alarm: name and dimensions make it so
    slug = re.sub(r"[^a-z0-9_]", "_", "_".join((name, *dimensions.values())).lower())
    r, d = f"reconcile_{slug}", f"dispatch_{slug}"
    return cw.MathExpression(
        expression=f"FILL({r}, 0) + FILL({d}, 0)", label=label or name, period=period,
        using_metrics={r: gqa_metric(name, "reconcile", period=period, **dimensions),
                       d: gqa_metric(name, "dispatch", period=period, **dimensions)})


@dataclass(frozen=True)
class Missing:
    """How an alarm treats a period with no data, and why."""

    treat: cw.TreatMissingData
    why: str


QUIET = Missing(cw.TreatMissingData.NOT_BREACHING, "no data means nothing happened")
HOLD = Missing(cw.TreatMissingData.IGNORE, "no data (a tick missed) changes nothing: the state holds")


class Observability(Construct):
    """`dashboard` (<prefix>queue) and `alarms`, every one notifying `topic`."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment, queues: Queues,
                 functions: Mapping[str, aws_lambda.IFunction], dead_letters: Sequence[sqs.IQueue],
                 topic: sns.ITopic) -> None:
        super().__init__(scope, id)
        self.prefix = config.prefix
        self.alarms: list[cw.Alarm] = []
        self._notify = actions.SnsAction(topic)
        budgets = [team.name for team in config.teams if team.budget is not None]

        for dead in dead_letters:
            name = dead.node.id   # the queue's logical name, e.g. intake-high-dlq
            self._alarm(
                f"{name}-not-empty",
                dead.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                0, cw.ComparisonOperator.GREATER_THAN_THRESHOLD, 1,
                Missing(cw.TreatMissingData.NOT_BREACHING, "SQS stops reporting an idle queue: it is empty"),
                f"messages in {name}: deliveries that failed every retry; read them, fix the cause, redrive them",
                recovers=True)
        self._alarm(
            "pending-too-long", gqa_metric("OldestPendingAge", "budget", "Maximum"), PENDING_TOO_LONG,
            cw.ComparisonOperator.GREATER_THAN_THRESHOLD, 1,
            Missing(cw.TreatMissingData.IGNORE, "the budget function measures it each tick; without a tick "
                                                "the last state holds, and its errors alarm says why"),
            f"a queued job has waited over {PENDING_TOO_LONG // 3600}h for GPUs (gqa status shows why)",
            recovers=True)
        self._alarm(
            "failure-rate", failure_rate(), FAILURE_RATE, cw.ComparisonOperator.GREATER_THAN_THRESHOLD, 1, QUIET,
            f"over {FAILURE_RATE}% of the jobs that ended in the last hour failed (at least {FAILURE_MIN_JOBS} "
            "ended): a bad image, a broken dataset or a bad node type")
        for team in budgets:
            for percent in BUDGET_THRESHOLDS:
                self._alarm(
                    f"budget-{team}-{percent}", gqa_metric("BudgetUsed", "budget", "Maximum", team=team), percent,
                    cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD, 1, HOLD,
                    f"team {team} has spent {percent}% of its monthly budget"
                    + (": its queued jobs are held" if percent >= 100 else ""))
        self._alarm(
            "idle-gpus", idle_gpus(), 0, cw.ComparisonOperator.GREATER_THAN_THRESHOLD, IDLE_PERIODS, QUIET,
            f"GPUs free while jobs wait, for {IDLE_PERIODS * 5} minutes: the dispatcher is not placing them (look "
            "at its errors and logs), or the waiting jobs fit no free GPU (another type, more GPUs than an "
            "instance has, a team at its GPU quota)", recovers=True)
        for function, fn in sorted(functions.items()):
            self._alarm(f"{function}-errors", fn.metric_errors(period=PERIOD, statistic="Sum"), 0,
                        cw.ComparisonOperator.GREATER_THAN_THRESHOLD, 1, QUIET,
                        f"the {function} function failed: its logs say why (SQS and Lambda retry it)")
            self._alarm(f"{function}-throttles", fn.metric_throttles(period=PERIOD, statistic="Sum"), 0,
                        cw.ComparisonOperator.GREATER_THAN_THRESHOLD, 1, QUIET,
                        f"the {function} function was throttled: its concurrency, or the account's, is used up")

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"{config.prefix}queue",
                                      default_interval=cdk.Duration.hours(24),
                                      widgets=widgets(config, queues, functions, budgets))

    def _alarm(self, name: str, metric: cw.IMetric, threshold: float, comparison: cw.ComparisonOperator,
               periods: int, missing: Missing, description: str, *, recovers: bool = False) -> cw.Alarm:
        """`recovers`: also notify when it clears (a state someone is waiting to see end)."""
        alarm = cw.Alarm(self, name, alarm_name=f"{self.prefix}{name}", metric=metric, threshold=threshold,
                         comparison_operator=comparison, evaluation_periods=periods, datapoints_to_alarm=periods,
                         treat_missing_data=missing.treat,
                         alarm_description=f"{description}. Missing data: {missing.why}.")
        alarm.add_alarm_action(self._notify)
        if recovers:
            alarm.add_ok_action(self._notify)
        self.alarms.append(alarm)
        return alarm


# -- alarms' metric math --------------------------------------------------------------------------
def failure_rate() -> cw.MathExpression:
    """Percent of the jobs that ended in the hour that failed, 0 below FAILURE_MIN_JOBS endings."""
    hour = cdk.Duration.hours(1)
    return cw.MathExpression(
        expression=f"IF(failed + succeeded >= {FAILURE_MIN_JOBS}, 100 * failed / (failed + succeeded), 0)",
        label="failed, % of ended", period=hour,
        using_metrics={"failed": settled("JobsFailed", period=hour),
                       "succeeded": settled("JobsSucceeded", period=hour)})


def idle_gpus() -> cw.MathExpression:
    """The lesser of the free GPUs and the queued jobs, each at its lowest in the period: above 0
    only when both were all along. A tick's missing point repeats the one before (the dispatch and
    budget functions run on their own schedules)."""
    return cw.MathExpression(
        expression="MIN([FILL(free, REPEAT), FILL(queued, REPEAT)])", label="free GPUs while jobs wait",
        period=PERIOD,
        using_metrics={"free": gqa_metric("FreeGpus", "dispatch", "Minimum"),
                       "queued": gqa_metric("PendingJobs", "budget", "Minimum")})


# -- the dashboard --------------------------------------------------------------------------------
WIDE, HALF, THIRD, HIGH = 24, 12, 8, 6


def widgets(config: Deployment, queues: Queues, functions: Mapping[str, aws_lambda.IFunction],
            budgets: list[str]) -> list[list[cw.IWidget]]:
    def graph(title: str, left: Sequence[cw.IMetric], width: int = HALF, **kwargs) -> cw.GraphWidget:
        return cw.GraphWidget(title=title, left=left, width=width, height=HIGH, **kwargs)

    intake = [q.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum",
                                                              label=f"intake {TIERS[rank]}")
              for rank, q in sorted(queues.intake.items())]
    pools = [(pool.pool_name, pool_name(pool.gpu_type, pool.spot)) for pool in config.pools]
    teams = [team.name for team in config.teams]
    return [
        [cw.TextWidget(markdown=f"# gqa {config.name}: the queue\nWaiting, running, spend, failures and the "
                                "control plane's functions.", width=WIDE, height=2)],
        [graph("Waiting to be admitted, by tier (intake queue messages)", intake),
         graph("Waiting for GPUs", [gqa_metric("PendingJobs", "budget", "Maximum", label="queued"),
                                    gqa_metric("HeldJobs", "budget", "Maximum", label="held by budget")],
               right=[gqa_metric("OldestPendingAge", "budget", "Maximum", label="oldest wait (s)")])],
        [graph("Queue wait (s), p50 and p95", [gqa_metric("QueueWait", "dispatch", "p50", label="p50"),
                                               gqa_metric("QueueWait", "dispatch", "p95", label="p95")],
               width=THIRD),
         graph("Running GPUs, by pool", [gqa_metric("HeldGpus", "dispatch", "Average", label=label, pool=name)
                                         for label, name in pools], width=THIRD, stacked=True),
         graph("Free GPUs, by pool", [gqa_metric("FreeGpus", "dispatch", "Average", label=label, pool=name)
                                      for label, name in pools], width=THIRD, stacked=True)],
        [graph("Spend this month, by team ($)", [gqa_metric("TeamSpend", "budget", "Maximum", label=t, team=t)
                                                 for t in teams]),
         graph("Budget used, by team (%)", [gqa_metric("BudgetUsed", "budget", "Maximum", label=t, team=t)
                                            for t in budgets],
               left_annotations=[cw.HorizontalAnnotation(value=p, label=f"{p}%") for p in BUDGET_THRESHOLDS])],
        [graph("Jobs ended", [settled(n) for n in ("JobsSucceeded", "JobsFailed", "JobsTimedOut",
                                                   "JobsCancelled", "OutOfMemory")], width=THIRD),
         graph("Retries, by kind", [settled("Retries", label=kind, kind=kind) for kind in RETRY_KINDS],
               width=THIRD, stacked=True),
         graph("Spot reclaims and capacity failures", [settled("SpotReclaims"), settled("CapacityFailures")],
               width=THIRD)],
        [graph("Function errors", [fn.metric_errors(period=PERIOD, statistic="Sum", label=name)
                                   for name, fn in sorted(functions.items())], width=THIRD),
         graph("Function throttles", [fn.metric_throttles(period=PERIOD, statistic="Sum", label=name)
                                      for name, fn in sorted(functions.items())], width=THIRD),
         graph(f"Function duration, {DURATION_PERCENTILE} (ms)",
               [fn.metric_duration(period=PERIOD, statistic=DURATION_PERCENTILE, label=name)
                for name, fn in sorted(functions.items())], width=THIRD)],
    ]
