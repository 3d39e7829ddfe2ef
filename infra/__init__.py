"""CDK constructs and stacks for the AWS backend. aws-cdk-lib is an optional
extra (`pip install gqa[cdk]`), so it is imported only when an app is built."""


def build_app():
    """The CDK app. Its stacks (Batch, SQS, DynamoDB, S3, Lambda) are defined
    in this package as the AWS backend is built."""
    import aws_cdk as cdk

    return cdk.App()
