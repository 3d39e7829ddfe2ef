"""Where the GPU instances live. `network.create`: a new VPC over two
availability zones with public subnets only and no NAT gateway, so an idle
queue pays for nothing; instances get public IPs to pull images and reach AWS
APIs, and S3 (checkpoints) goes through a gateway endpoint, free. Its flow
logs go to CloudWatch. `network.existing`: the VPC and subnets given, taken
as they are (no lookup: the stacks synthesize without credentials).

Either way, one security group for the instances: nothing may connect to
them, and they may connect anywhere."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from gqa.models.deployment import Deployment

AZS = 2
SUBNET_MASK = 20                       # 4091 addresses per subnet: room for any pool
FLOW_LOGS_KEPT = logs.RetentionDays.THREE_MONTHS


class Network(Construct):
    """`subnet_ids` and `security_group` for the Batch compute environments;
    `vpc` is the created VPC, None for an existing one."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment) -> None:
        super().__init__(scope, id)
        self.vpc: ec2.Vpc | None = None
        self.flow_logs: logs.LogGroup | None = None
        if config.network.existing is not None:
            vpc_id = config.network.existing.vpc_id
            self.subnet_ids: list[str] = list(config.network.existing.subnet_ids)
        else:
            self.vpc = self._create(config)
            vpc_id = self.vpc.vpc_id
            self.subnet_ids = [s.subnet_id for s in self.vpc.public_subnets]
        # made from the VPC's id alone, so an existing VPC needs no lookup
        group = ec2.CfnSecurityGroup(
            self, "Instances", vpc_id=vpc_id,
            group_description=f"gqa {config.name} GPU instances: no inbound; outbound for images and AWS APIs",
            security_group_egress=[ec2.CfnSecurityGroup.EgressProperty(
                ip_protocol="-1", cidr_ip="0.0.0.0/0", description="images, checkpoints and AWS APIs")],
            tags=[cdk.CfnTag(key="Name", value=f"{config.prefix}gpu-instances")])
        self.security_group: ec2.ISecurityGroup = ec2.SecurityGroup.from_security_group_id(
            self, "InstancesGroup", group.attr_group_id, allow_all_outbound=True)

    def _create(self, config: Deployment) -> ec2.Vpc:
        removal = cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY
        vpc = ec2.Vpc(
            self, "Vpc", vpc_name=f"{config.prefix}vpc", max_azs=AZS, nat_gateways=0,
            subnet_configuration=[ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC,
                                                          cidr_mask=SUBNET_MASK, map_public_ip_on_launch=True)],
            # nothing uses the default security group; restricting it would take a custom resource function
            restrict_default_security_group=False)
        vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=FLOW_LOGS_KEPT, removal_policy=removal)
        vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                         traffic_type=ec2.FlowLogTrafficType.ALL)
        self.flow_logs = flow_logs
        return vpc
