"""AWS backends. `tables` is plain data (no boto3) so the CDK stack can read
the same key and index definitions the adapters use."""
