#!/usr/bin/env python3
"""`cdk synth` / `cdk deploy` entry point (see cdk.json). A bad deployment
file, or a stack CloudFormation would refuse, is one line (and exit status
2), not a traceback."""

import sys

from gqa.models.errors import SpecError
from infra import DeploymentError, build_app

if __name__ == "__main__":
    try:
        build_app().synth()
    except (SpecError, DeploymentError) as exc:
        print(f"gqa: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:   # the synth's own checks (jsii errors): e.g. more than 500 resources
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        print(f"gqa: the stacks cannot be synthesized: {first}", file=sys.stderr)
        sys.exit(2)
