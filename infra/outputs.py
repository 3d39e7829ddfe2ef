"""The service stack's outputs: exactly what `gqa config set` needs, and the
commands themselves, which `cdk deploy` prints at the end."""

from __future__ import annotations

import aws_cdk as cdk

from .api import STAGE, Api


def outputs(stack: cdk.Stack, api: Api) -> None:
    endpoint = cdk.Fn.join("", ["https://", api.rest_api.rest_api_id, ".execute-api.", stack.region, ".",
                                stack.url_suffix, f"/{STAGE}"])
    cdk.CfnOutput(stack, "Endpoint", value=endpoint, description="gqa config set endpoint <this>")
    cdk.CfnOutput(stack, "Region", value=stack.region, description="gqa config set region <this>")
    cdk.CfnOutput(stack, "ConfigureCli", description="run once on each machine that uses this deployment",
                  value=cdk.Fn.join("", ["gqa config set backend aws && gqa config set region ", stack.region,
                                         " && gqa config set endpoint ", endpoint, " && gqa whoami"]))
    cdk.CfnOutput(stack, "ResearcherPolicy", value=api.researchers.managed_policy_arn,
                  description="attach to researchers (users, groups or roles)")
    cdk.CfnOutput(stack, "ApproverPolicy", value=api.approvers.managed_policy_arn,
                  description="attach to approvers instead of the researcher policy")
    cdk.CfnOutput(stack, "AdminPolicy", value=api.admins.managed_policy_arn,
                  description="attach to admins instead of the researcher policy")
