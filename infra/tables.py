"""The three DynamoDB tables, built from gqa/adapters/aws/tables.py, the
definitions the adapter reads its keys from: on demand, point-in-time
recovery, encrypted with an AWS managed key, TTL where the adapters write
expiry times, and deletion protection when the deployment retains its data."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from gqa.adapters.aws import tables as t
from gqa.models.deployment import Deployment

_TYPES = {t.S: dynamodb.AttributeType.STRING, t.N: dynamodb.AttributeType.NUMBER}
READ_WRITE = ("dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem",
              "dynamodb:DeleteItem", "dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem",
              "dynamodb:Query", "dynamodb:Scan", "dynamodb:UpdateItem")
_PROJECTIONS = {"ALL": dynamodb.ProjectionType.ALL, "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
                "INCLUDE": dynamodb.ProjectionType.INCLUDE}


def _attribute(key: t.Key | None) -> dynamodb.Attribute | None:
    return None if key is None else dynamodb.Attribute(name=key.name, type=_TYPES[key.type])


class Tables(Construct):
    """jobs, settings and ledger, named <prefix>jobs etc. (TableNames.prefixed). `indexes_through`:
    an upgrade step, the jobs table built with its indexes up to that one (t.indexes_through)."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment, indexes_through: str | None = None) -> None:
        super().__init__(scope, id)
        self.names = t.TableNames.prefixed(config.prefix)
        removal = cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY
        built: dict[str, dynamodb.Table] = {}
        for definition in t.TABLES:
            table = dynamodb.Table(
                self, definition.logical.capitalize(),
                table_name=self.names.of(definition),
                partition_key=_attribute(definition.partition), sort_key=_attribute(definition.sort),
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                encryption=dynamodb.TableEncryption.AWS_MANAGED,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True),
                time_to_live_attribute=definition.ttl,
                deletion_protection=config.retain_data,
                removal_policy=removal)
            indexes = t.indexes_through(definition, indexes_through) if definition is t.JOBS else definition.indexes
            for index in indexes:
                table.add_global_secondary_index(
                    index_name=index.name, partition_key=_attribute(index.partition),
                    sort_key=_attribute(index.sort), projection_type=_PROJECTIONS[index.projection],
                    non_key_attributes=list(index.include) or None)
            built[definition.logical] = table
        self.jobs, self.settings, self.ledger = built["jobs"], built["settings"], built["ledger"]

    @property
    def all(self) -> tuple[dynamodb.Table, ...]:
        return (self.jobs, self.settings, self.ledger)

    def grant_read_write(self, grantee: iam.IGrantable) -> None:
        """Items of the three tables and of their named indexes (every function reads and writes
        them): the item actions of Table.grant_read_write_data, without its streams and its
        index/* wildcard."""
        for definition, table in zip(t.TABLES, self.all):
            grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
                actions=list(READ_WRITE),
                resources=[table.table_arn, *(f"{table.table_arn}/index/{i.name}" for i in definition.indexes)]))
