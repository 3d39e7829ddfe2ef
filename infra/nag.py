"""cdk-nag's AwsSolutions rules on every synth: a finding fails `cdk synth`
(and Template.from_stack in the tests) unless it is acknowledged here, each
acknowledgement naming the resource it covers and why."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks


def check(app: cdk.App) -> None:
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
