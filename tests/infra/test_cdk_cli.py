"""`cdk synth` as a user runs it: the project's pinned CDK command line
(package.json, installed by `make test`) runs cdk.json's `python3 app.py`
with the project's Python, and writes both stacks' templates; a bad
deployment file stops it with one line naming the field, not a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.infra.support import ROOT, example_values

CDK = ROOT / "node_modules" / ".bin" / "cdk"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: the CDK CLI runs on it")]


def cdk(*args: str) -> subprocess.CompletedProcess:
    assert CDK.exists(), "the CDK command line is not installed: `make test` installs it (npm ci)"
    env = {**os.environ,
           # cdk.json's app is `python3 app.py`: the interpreter running the tests, which has aws-cdk-lib
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "CDK_DISABLE_CLI_TELEMETRY": "1", "CDK_DISABLE_VERSION_CHECK": "1",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):   # never the developer's own account
        env.pop(name, None)
    return subprocess.run([str(CDK), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_the_installed_cli_is_the_pinned_one():
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    installed = json.loads((ROOT / "node_modules" / "aws-cdk" / "package.json").read_text())["version"]
    assert installed == pinned


def test_synth_writes_both_stacks_templates(tmp_path):
    result = cdk("synth", "-q", "--output", str(tmp_path))

    assert result.returncode == 0, result.stderr[-4000:]
    for stack in ("gqa-dev-data", "gqa-dev-service"):
        template = json.loads((tmp_path / f"{stack}.template.json").read_text())
        assert template["Resources"], stack


def test_a_bad_deployment_file_fails_with_the_field_named_and_no_traceback(tmp_path):
    values = example_values()
    values["pools"][0]["max_gpus"] = 0
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(values))

    result = cdk("synth", "-q", "--output", str(tmp_path / "out"), "-c", f"gqa:config-file={config}")

    assert result.returncode != 0
    assert f"gqa: {config}:" in result.stderr and "pools[0].max_gpus: must be greater than 0" in result.stderr
    assert "Traceback" not in result.stderr
