"""AWS backends. `tables` and `resources` are plain data (no boto3) so the CDK
stack can read the same table, queue and pool definitions the adapters use."""
