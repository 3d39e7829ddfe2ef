"""The CLI in-process against a fresh state directory with 4 GPUs registered
(no daemon: these tests are about what the CLI accepts, prints and writes)."""

import json

import pytest

from cli.main import main
from gqa.adapters.local.store import SqliteStore
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu


class Cli:
    def __init__(self, home, capsys):
        self.home, self.capsys = home, capsys
        self.store = SqliteStore(home / "gqa.db")
        self.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(4)), cpus=8, memory=64 << 30))

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(list(args))
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def json(self, *args: str):
        args = list(args)
        cut = args.index("--") if "--" in args else len(args)
        code, out, err = self(*args[:cut], "-o", "json", *args[cut:])
        assert code == 0, err
        return json.loads(out)

    def job_count(self) -> int:
        return self.store.db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys) -> Cli:
    monkeypatch.setenv("GQA_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path, capsys)


@pytest.fixture
def aws(tmp_path, monkeypatch, capsys):
    """The CLI against a whole deployment on moto, called as `aws(who, *args)` (aws_cli.py)."""
    from tests.cli.aws_cli import aws_cli

    yield from aws_cli(monkeypatch, capsys, tmp_path)
