"""CDK constructs and stacks for the AWS backend: one construct per concern,
two stacks that compose them (stacks.py). aws-cdk-lib is an optional extra
(`pip install gqa[cdk]`), so it is imported only when an app is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent   # the project: lambdas/, gqa/, examples/


class DeploymentError(RuntimeError):
    """The app cannot be built for a reason other than the file (e.g. the
    functions' dependencies could not be fetched); the message is one line."""


def build_app(context: dict[str, Any] | None = None, *, outdir: str | None = None):
    """The CDK app for the deployment its context names ("gqa:config-file" or
    "gqa:config"), checked by cdk-nag. A bad configuration raises SpecError
    naming the field, before any construct is made."""
    import aws_cdk as cdk

    from gqa.models.deployment import deployment_from_context

    from .nag import check
    from .stacks import build_stacks

    app = cdk.App(context=context, outdir=outdir)
    config = deployment_from_context(_context(app), base_dir=ROOT)
    build_stacks(app, config, indexes_through=_indexes_through(app))
    check(app)
    return app


def _indexes_through(app) -> str | None:
    """`-c gqa:indexes-through=<index>`: an upgrade step that builds the jobs table's indexes up to
    that one (gqa.adapters.aws.tables.indexes_through); checked before any construct is made."""
    from gqa.adapters.aws import tables
    from gqa.models.errors import SpecError

    last = app.node.try_get_context("gqa:indexes-through")
    if last is not None and not isinstance(last, str):
        raise SpecError("gqa:indexes-through names an index of the jobs table", source="cdk.json context")
    tables.indexes_through(tables.JOBS, last)
    return last


def _context(app) -> dict[str, Any]:
    keys = ("gqa:config-file", "gqa:config")
    return {key: app.node.try_get_context(key) for key in keys if app.node.try_get_context(key) is not None}
