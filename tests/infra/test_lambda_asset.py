"""infra/lambda_asset.py: the functions' code folder, built without Docker.

The cache's rules run on a small project of their own with a counting
installer (fast). The tests marked slow build the real folder under build/
(pip fetches the arm64 wheels from PyPI the first time, ~10 s) and check
what Lambda will run: our sources, no local-only code, wheels for
linux-aarch64 CPython 3.12, and sources that import with nothing missing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import threading
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk")

from infra import lambda_asset  # noqa: E402
from infra.lambda_asset import AssetBuildError, build_asset  # noqa: E402

HANDLERS = ("lambdas.api", "lambdas.admit", "lambdas.dispatch", "lambdas.reconcile", "lambdas.budget",
            "lambdas.trigger")


class CountingInstaller:
    """Stands in for pip: records each call and installs one small package."""

    def __init__(self, wait: threading.Barrier | None = None):
        self.calls: list[tuple[str, ...]] = []
        self.wait = wait

    def __call__(self, target: Path, requirements, constraints: Path) -> None:
        self.calls.append(tuple(requirements))
        assert constraints.read_text().splitlines() == lambda_asset.pinned_constraints()
        if self.wait is not None:
            self.wait.wait(timeout=30)
        (target / "installed_wheel").mkdir(parents=True)
        (target / "installed_wheel" / "__init__.py").write_text("")
        (target / "bin").mkdir()
        (target / "bin" / "jp.py").write_text("")


def small_project(root: Path) -> Path:
    files = {
        "lambdas/__init__.py": "", "lambdas/environment.py": "NAME = 1\n", "lambdas/api/__init__.py": "",
        "gqa/__init__.py": "", "gqa/models/spec.py": "", "gqa/adapters/aws/store.py": "",
        "gqa/adapters/local/daemon_store.py": "", "gqa/sim/run.py": "",
        "gqa/models/__pycache__/spec.cpython-311.pyc": "", "gqa/models/stale.pyc": "", "gqa/tests/test_x.py": "",
        "cli/client.py": "", "daemon/main.py": "", "tests/test_y.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def project(tmp_path):
    return small_project(tmp_path / "project")


def shipped(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


# -- the cache -------------------------------------------------------------------------------------
def test_only_what_the_functions_need_is_copied(project, tmp_path):
    folder = build_asset(root=project, cache=tmp_path / "cache", installer=CountingInstaller())
    assert shipped(folder) == {"lambdas/__init__.py", "lambdas/environment.py", "lambdas/api/__init__.py",
                               "gqa/__init__.py", "gqa/models/spec.py", "gqa/adapters/aws/store.py",
                               "installed_wheel/__init__.py"}   # no bin/: console scripts run nowhere
    assert folder.parent == tmp_path / "cache" and folder.stat().st_mode & 0o777 == 0o755
    assert all((folder / f).stat().st_mode & 0o777 == 0o644 for f in shipped(folder))


def test_a_second_build_with_nothing_changed_copies_nothing_and_installs_nothing(project, tmp_path):
    installer = CountingInstaller()
    first = build_asset(root=project, cache=tmp_path / "cache", installer=installer)
    before = {f: (first / f).stat().st_mtime_ns for f in shipped(first)}
    again = build_asset(root=project, cache=tmp_path / "cache", installer=installer)
    assert again == first
    assert {f: (again / f).stat().st_mtime_ns for f in shipped(again)} == before
    assert installer.calls == [tuple(lambda_asset.pinned_requirements())]


def test_a_changed_source_builds_a_new_folder_and_prunes_the_old(project, tmp_path):
    installer = CountingInstaller()
    old = build_asset(root=project, cache=tmp_path / "cache", installer=installer)
    (project / "lambdas" / "environment.py").write_text("NAME = 2\n")
    new = build_asset(root=project, cache=tmp_path / "cache", installer=installer)
    assert new != old and not old.exists()
    assert (new / "lambdas" / "environment.py").read_text() == "NAME = 2\n"
    assert len(installer.calls) == 2
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [new.name]


def test_a_new_file_changes_the_key_too(project, tmp_path):
    old = build_asset(root=project, cache=tmp_path / "cache", installer=CountingInstaller())
    (project / "gqa" / "models" / "new.py").write_text("")
    assert build_asset(root=project, cache=tmp_path / "cache", installer=CountingInstaller()) != old


def test_two_builds_at_once_agree_on_one_complete_folder(project, tmp_path):
    """Both find no folder and build; one rename wins, the other uses its folder."""
    installer = CountingInstaller(wait=threading.Barrier(2))
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(
        build_asset(root=project, cache=tmp_path / "cache", installer=installer))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(installer.calls) == 2 and len(results) == 2 and results[0] == results[1]
    assert "installed_wheel/__init__.py" in shipped(results[0])
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [results[0].name]   # no temporary folder left


def test_a_failed_install_leaves_nothing_behind(project, tmp_path):
    def failing(target, requirements, constraints):
        raise AssetBuildError("cannot build the Lambda functions' code: no network")

    with pytest.raises(AssetBuildError):
        build_asset(root=project, cache=tmp_path / "cache", installer=failing)
    assert list((tmp_path / "cache").iterdir()) == []


def test_requirements_are_the_installed_versions():
    for requirement in lambda_asset.pinned_requirements():
        name, version = requirement.split("==")
        assert metadata.version(name) == version
    constraints = dict(line.split("==") for line in lambda_asset.pinned_constraints())
    assert constraints["pydantic-core"] == metadata.version("pydantic-core")
    assert constraints["botocore"] == metadata.version("botocore")
    assert not any(name in constraints for name in ("email-validator", "aws-xray-sdk"))   # extras: not installed


# -- the real folder -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def folder() -> Path:
    return build_asset()


@pytest.mark.slow
def test_the_real_folder_is_reused_without_pip(folder):
    def no_pip(*_):
        raise AssertionError("pip was called for an unchanged folder")

    assert build_asset(installer=no_pip) == folder
    code = lambda_asset.function_code(installer=no_pip)
    assert Path(code.path) == folder


@pytest.mark.slow
def test_the_folder_holds_our_sources_and_no_local_only_code(folder):
    assert (folder / "lambdas" / "environment.py").is_file() and (folder / "gqa" / "models" / "spec.py").is_file()
    for absent in ("cli", "daemon", "tests", "gqa/sim", "gqa/adapters/local", "bin"):
        assert not (folder / absent).exists(), absent
    assert not list(folder.glob("gqa/**/__pycache__")) and not list(folder.glob("lambdas/**/__pycache__"))


@pytest.mark.slow
def test_the_wheels_are_the_installed_versions_built_for_arm64_python_3_12(folder):
    bundled = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version
               for d in metadata.distributions(path=[str(folder)])}
    assert bundled == dict(line.split("==") for line in lambda_asset.pinned_constraints())
    (core,) = folder.glob("pydantic_core/_pydantic_core*.so")
    assert core.name == "_pydantic_core.cpython-312-aarch64-linux-gnu.so"
    (yaml_ext,) = folder.glob("yaml/_yaml*.so")
    assert yaml_ext.name == "_yaml.cpython-312-aarch64-linux-gnu.so"


@pytest.mark.slow
def test_the_handlers_import_every_module_of_ours_from_the_folder(folder, tmp_path):
    """The arm64 binaries cannot load here: the venv's stand in for them, while every gqa and lambdas
    module must come from the folder (a module the copy left out fails here, not on Lambda)."""
    site_packages = sysconfig.get_paths()["purelib"]
    script = f"""
import json, sys
sys.path[:0] = [{site_packages!r}]
sys.path.append({str(folder)!r})
import {", ".join(HANDLERS)}
ours = {{n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())
        if n.split(".")[0] in ("gqa", "lambdas")}}
print(json.dumps(ours))
"""
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": "", "AWS_DEFAULT_REGION": "us-east-1"}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    ours = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(HANDLERS) <= set(ours)
    assert {name: path for name, path in ours.items() if path and not path.startswith(str(folder))} == {}


@pytest.mark.slow
def test_a_failed_download_says_what_failed_in_one_line(tmp_path):
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("")
    with pytest.raises(AssetBuildError) as failed:
        lambda_asset.pip_install(tmp_path / "target", ["gqa-no-such-distribution-anywhere==0.0.1"], constraints)
    message = str(failed.value)
    assert "\n" not in message
    assert "gqa-no-such-distribution-anywhere==0.0.1" in message and "PyPI must be reachable" in message
