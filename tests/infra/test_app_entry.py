"""app.py, the entry point cdk.json runs: whatever stops the synth is one line on
stderr and exit status 2, never a traceback."""

from __future__ import annotations

import runpy

import pytest

from tests.infra.support import ROOT


class _Refused:
    def synth(self):
        raise RuntimeError("TooManyResourcesInStack: Number of resources in stack 'gqa-dev-service': 517 is "
                           "greater than allowed maximum of 500: AWS::EC2::VPC (1)\n    at Stack.synth (x.js:1:1)")


def test_an_error_from_the_synth_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr("infra.build_app", lambda: _Refused())
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == ("gqa: the stacks cannot be synthesized: TooManyResourcesInStack: Number of resources in stack "
                   "'gqa-dev-service': 517 is greater than allowed maximum of 500: AWS::EC2::VPC (1)\n")
