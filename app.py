#!/usr/bin/env python3
"""`cdk synth` / `cdk deploy` entry point (see cdk.json)."""

from infra import build_app

if __name__ == "__main__":
    build_app().synth()
