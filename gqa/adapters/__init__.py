"""Backends: the only code that touches sqlite3, subprocess, the filesystem or boto3."""
