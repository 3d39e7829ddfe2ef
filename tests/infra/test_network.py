"""infra/network.py: a created VPC that costs nothing while idle, or an
existing one taken as given; one closed security group for the instances.
support.template is also the cdk-nag check."""

from __future__ import annotations

import pytest

from tests.infra import support

cdk = pytest.importorskip("aws_cdk")

SUBNETS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]
EXISTING = {"existing": {"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": SUBNETS}}


def build(**changes):
    from infra.network import Network

    stack = cdk.Stack(support.nagged_app(), "Net")
    network = Network(stack, "Network", config=support.deployment(**changes))
    return stack, network, support.template(stack)


@pytest.fixture(scope="module")
def created():
    return build()


@pytest.fixture(scope="module")
def existing():
    return build(network=EXISTING)


def test_a_created_vpc_has_public_subnets_and_no_nat_gateway(created):
    stack, network, template = created
    template.resource_count_is("AWS::EC2::VPC", 1)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::EIP", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 1)
    subnets = template.find_resources("AWS::EC2::Subnet")
    assert len(subnets) == 2                                     # two availability zones
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is True for s in subnets.values())
    assert sorted(stack.resolve(network.subnet_ids), key=str) == sorted(({"Ref": k} for k in subnets), key=str)
    assert network.vpc is not None
    # checkpoints reach S3 through a free gateway endpoint
    template.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})


@pytest.mark.parametrize("retain, deletion", [(False, "Delete"), (True, "Retain")])
def test_a_created_vpc_logs_its_flows_kept_as_the_data_is(retain, deletion):
    _, _, template = build(retain_data=retain)
    [group_id] = template.find_resources("AWS::Logs::LogGroup", {"DeletionPolicy": deletion})
    template.has_resource_properties("AWS::EC2::FlowLog", {
        "ResourceType": "VPC", "TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs",
        "LogGroupName": {"Ref": group_id}})


def test_an_existing_network_is_taken_as_given(existing):
    stack, network, template = existing
    assert network.subnet_ids == SUBNETS
    assert network.vpc is None
    for kind in ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::FlowLog", "AWS::EC2::InternetGateway"):
        template.resource_count_is(kind, 0)
    template.has_resource_properties("AWS::EC2::SecurityGroup", {"VpcId": "vpc-0123456789abcdef0"})


@pytest.mark.parametrize("which", ["created", "existing"])
def test_the_instances_security_group_lets_nothing_in_and_everything_out(request, which):
    stack, network, template = request.getfixturevalue(which)
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    [(group_id, group)] = groups.items()
    assert "SecurityGroupIngress" not in group["Properties"]
    template.resource_count_is("AWS::EC2::SecurityGroupIngress", 0)
    [egress] = group["Properties"]["SecurityGroupEgress"]
    assert (egress["CidrIp"], egress["IpProtocol"]) == ("0.0.0.0/0", "-1")
    assert stack.resolve(network.security_group.security_group_id) == {"Fn::GetAtt": [group_id, "GroupId"]}
