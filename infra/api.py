"""The REST API in front of the api function: a Lambda proxy on every path,
AWS_IAM authorisation on every method (API Gateway checks the SigV4
signature and hands the function the caller's ARN), access logs, stage
throttling; and the IAM managed policies people are given to call it.

IAM decides who may reach which route; the api function's access rule
(GQA_ACCESS: owners, approvers, admins) decides the rest, with the reason
in the answer. The three managed policies mirror lambdas/api's routes: an
approver's or admin's policy is whole, so a person is given one of them.
Each also lets its holder store code bundles (`gqa submit` on AWS): list and
put under the checkpoint bucket's code/ prefix, nothing else there.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from gqa.models.deployment import Deployment

from .checkpoints import Checkpoints
from .nag import acknowledge, acknowledge_policy_wildcards

STAGE = "v1"
# (method, path) as execute-api ARNs name them; * stands for a job or trigger reference
RESEARCHER_ROUTES = (("GET", "*"), ("POST", "jobs"), ("POST", "jobs/*/cancel"), ("POST", "jobs/*/requeue"),
                     ("POST", "jobs/*/hold"), ("POST", "jobs/*/release"), ("POST", "jobs/*/update"),
                     ("POST", "triggers"), ("DELETE", "triggers/*"))
APPROVER_ROUTES = (("POST", "jobs/*/approve"), ("POST", "jobs/*/deny"))
ADMIN_ROUTES = (("*", "*"),)   # quotas and the policy (PUT /quota/...), and everything else
RATE, BURST = 50, 100          # requests per second over the stage: a runaway script is refused (429), not billed


class Api(Construct):
    def __init__(self, scope: Construct, id: str, *, config: Deployment, function: lambda_.IFunction,
                 checkpoints: Checkpoints) -> None:
        super().__init__(scope, id)
        self.checkpoints = checkpoints
        removal = cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY
        access_logs = logs.LogGroup(self, "AccessLogs", retention=logs.RetentionDays.ONE_YEAR, removal_policy=removal)
        self.rest_api = apigw.LambdaRestApi(
            self, "Rest", rest_api_name=f"{config.prefix}api", handler=function, proxy=True,
            description=f"gqa {config.name}: the CLI's backend",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            # the account-wide setting execution logs need (one per account and region), shared by every
            # API there: its role outlives this stack, as CDK keeps it by default
            cloud_watch_role=True, cloud_watch_role_removal_policy=cdk.RemovalPolicy.RETAIN,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE, throttling_rate_limit=RATE, throttling_burst_limit=BURST,
                logging_level=apigw.MethodLoggingLevel.ERROR, metrics_enabled=True, tracing_enabled=True,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True, http_method=True, ip=True, protocol=True, request_time=True,
                    resource_path=True, response_length=True, status=True, user=True)))
        self.researchers = self._policy("Researchers", config, RESEARCHER_ROUTES,
                                        "submit, read the queue, status, logs and cost; cancel, requeue, "
                                        "hold, release and update their own jobs; manage their triggers")
        self.approvers = self._policy("Approvers", config, RESEARCHER_ROUTES + APPROVER_ROUTES,
                                      "what researchers may, and approve or deny jobs over the thresholds")
        self.admins = self._policy("Admins", config, ADMIN_ROUTES, "every route, quotas and the policy included")
        self._accept_findings()

    def _accept_findings(self) -> None:
        rest = self.rest_api
        acknowledge(rest, "COG4", "every method uses AWS_IAM authorisation (SigV4, the caller's IAM identity is "
                                  "the job owner); a Cognito user pool would add a second identity system")
        acknowledge(rest, "APIG2", "a Lambda proxy: the api function validates every body and parameter and "
                                   "answers 400 with the field at fault, which request models could not say")
        acknowledge(rest.deployment_stage, "APIG3", "unsigned requests are refused by IAM authorisation before "
                                                    "they cost anything, and the stage is throttled to "
                                                    f"{RATE} requests/s; a WAF web ACL can be associated "
                                                    "by the account's own WAF policy")
        acknowledge(rest, "IAM4", "API Gateway's account-wide CloudWatch role takes the AWS managed policy "
                                  "AmazonAPIGatewayPushToCloudWatchLogs, the one API Gateway documents",
                    applies_to=("Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                                "AmazonAPIGatewayPushToCloudWatchLogs",))

    @property
    def url(self) -> str:
        return self.rest_api.url

    def _policy(self, id: str, config: Deployment, routes: tuple[tuple[str, str], ...],
                what: str) -> iam.ManagedPolicy:
        arns = [self.rest_api.arn_for_execute_api(method, f"/{path}", STAGE) for method, path in routes]
        policy = iam.ManagedPolicy(self, id, managed_policy_name=f"{config.prefix}{id.lower()}",
                                   description=f"gqa {config.name}: {what}",
                                   statements=[iam.PolicyStatement(actions=["execute-api:Invoke"], resources=arns)])
        api_id = cdk.Stack.of(self).resolve(self.rest_api.rest_api_id)["Ref"]
        acknowledge(policy, "IAM5", "a route's path holds the job or trigger ids it acts on (jobs/12,13/cancel); "
                                    "* stands for them, under one method and route of this API's stage",
                    applies_to=tuple(f"Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:"
                                     f"<{api_id}>/{STAGE}/{method}/{path}" for method, path in routes))
        policy.add_statements(*self.checkpoints.code_upload_statements())
        acknowledge_policy_wildcards(policy, f"/{self.checkpoints.code_prefix}/*",
                                     "gqa submit stores the submitter's code as code/<sha256>.tar.gz, named by its "
                                     "content, which no policy can list in advance: upload only, under the code "
                                     "prefix")
        return policy
