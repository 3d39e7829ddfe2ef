"""The checkpoint bucket: public access blocked, TLS only, encrypted,
versioned, old checkpoint versions expired; its server access logs go to a
bucket of their own. Jobs save under `checkpoints/<job id>/`; the trigger
function writes large bursts' key lists under gqa-trigger-manifests/;
submitters store their code bundles under code/ (gqa.models.code), which
expire KEPT_DAYS after their upload; a trigger keeps its copy of its job's
bundle under gqa-trigger-code/, which no rule expires (it is deleted with
the trigger)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gqa.models import code
from gqa.models.trigger import MANIFEST_ROOT
from gqa.models.deployment import Deployment

PREFIX = "checkpoints"              # lambdas/environment.py's default GQA_CHECKPOINT_PREFIX
OLD_VERSIONS_KEPT_DAYS = 30         # an overwritten or deleted checkpoint can be restored this long
MANIFESTS_KEPT_DAYS = 90            # a burst's key list outlives its job by far
ACCESS_LOGS_KEPT_DAYS = 365


class Checkpoints(Construct):
    def __init__(self, scope: Construct, id: str, *, config: Deployment) -> None:
        super().__init__(scope, id)
        removal = cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY
        common: dict[str, Any] = dict(
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True,
            encryption=s3.BucketEncryption.S3_MANAGED, removal_policy=removal,
            auto_delete_objects=not config.retain_data,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED)
        self.access_logs = s3.Bucket(
            self, "AccessLogs", **{**common, "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_PREFERRED},
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(ACCESS_LOGS_KEPT_DAYS))])
        self.bucket = s3.Bucket(
            self, "Bucket", **common, versioned=True,
            server_access_logs_bucket=self.access_logs, server_access_logs_prefix="checkpoints/",
            lifecycle_rules=[
                s3.LifecycleRule(id="old-versions",
                                 noncurrent_version_expiration=cdk.Duration.days(OLD_VERSIONS_KEPT_DAYS),
                                 abort_incomplete_multipart_upload_after=cdk.Duration.days(7),
                                 expired_object_delete_marker=True),
                s3.LifecycleRule(id="manifests", prefix=MANIFEST_ROOT,
                                 expiration=cdk.Duration.days(MANIFESTS_KEPT_DAYS)),
                # a submitter uploads a bundle again once it is REFRESH_DAYS old, so one in use never expires
                s3.LifecycleRule(id="code", prefix=f"{code.PREFIX}/",
                                 expiration=cdk.Duration.days(code.KEPT_DAYS))])
        self.prefix = PREFIX
        self.code_prefix = code.PREFIX
        self.trigger_code_prefix = code.TRIGGER_PREFIX

    def grant_jobs(self, role: iam.IGrantable) -> None:
        """What a job's checkpoint helpers do under the prefix: write, read,
        list and sweep old checkpoints. Listing is what makes a missing
        `latest` pointer read as "no such key" (no checkpoint yet) rather than
        "access denied"."""
        self.grant_read_prefix(role, PREFIX)
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:PutObject", "s3:DeleteObject"],
            resources=[self.bucket.arn_for_objects(f"{PREFIX}/*")]))

    def grant_read_prefix(self, role: iam.IGrantable, prefix: str) -> None:
        """GetObject under `prefix`, and ListBucket restricted to it."""
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(f"{prefix}/*")]))
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{prefix}/*", f"{prefix}/"]}}))

    def grant_code_read(self, role: iam.IGrantable) -> None:
        """A job fetches its code; listing makes an expired bundle read as missing, not denied."""
        self.grant_read_prefix(role, code.PREFIX)

    def grant_code_lookup(self, role: iam.IGrantable) -> None:
        """The api function checks that a submission's bundle is there (a listing, see code_store.py)."""
        role.grant_principal.add_to_principal_policy(self._code_listing())

    def grant_trigger_code_keeping(self, role: iam.IGrantable) -> None:
        """The api function: a trigger's copy of its bundle, made when it is added (S3's copy reads
        code/ and writes the copy) and deleted when it is removed."""
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(f"{code.PREFIX}/*")]))
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:PutObject", "s3:DeleteObject"],
            resources=[self.bucket.arn_for_objects(f"{code.TRIGGER_PREFIX}/*")]))

    def grant_trigger_code_use(self, role: iam.IGrantable) -> None:
        """The trigger function: each burst looks for the bundle and the trigger's copy, and copies
        one to the other (back under code/ when it expired, or a copy for a trigger without one)."""
        for prefix in (code.PREFIX, code.TRIGGER_PREFIX):
            self.grant_read_prefix(role, prefix)
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{prefix}/*")
                                                 for prefix in (code.PREFIX, code.TRIGGER_PREFIX)]))

    def code_upload_statements(self) -> list[iam.PolicyStatement]:
        """A submitter's rights (the people's managed policies): look for a bundle, upload it;
        nothing else in the bucket, and no reading of anyone's code."""
        return [self._code_listing(), iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{code.PREFIX}/*")])]

    def _code_listing(self) -> iam.PolicyStatement:
        return iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn],
                                   conditions={"StringLike": {"s3:prefix": [f"{code.PREFIX}/*"]}})

    def grant_manifests(self, role: iam.IGrantable) -> None:
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{MANIFEST_ROOT}*")]))

    def grant_manifest_read(self, role: iam.IGrantable) -> None:
        """A triggered job reads its burst's key list (GQA_TRIGGER_MANIFEST); it names an object the
        trigger function wrote before submitting, so no listing is needed to tell it missing."""
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(f"{MANIFEST_ROOT}*")]))
