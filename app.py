#!/usr/bin/env python3
"""`cdk synth` / `cdk deploy` entry point (see cdk.json). A bad deployment
file is one line naming the field (and exit status 2), not a traceback."""

import sys

from gqa.models.errors import SpecError
from infra import DeploymentError, build_app

if __name__ == "__main__":
    try:
        app = build_app()
    except (SpecError, DeploymentError) as exc:
        print(f"gqa: {exc}", file=sys.stderr)
        sys.exit(2)
    app.synth()
