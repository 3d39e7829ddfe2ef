"""The layers in DESIGN.md: imports point down only, the pure core has no I/O."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = ("gqa/models", "gqa/scheduling")
IO_MODULES = {"sqlite3", "subprocess", "socket", "boto3", "botocore", "selectors", "fcntl", "time", "os", "shutil"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # resolve relative imports against the file's package
                parts = path.relative_to(ROOT).with_suffix("").parts[:-node.level]
                base = ".".join(parts + ((node.module,) if node.module else ()))
            found.add(base)
    return found


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", [p for f in PURE for p in _files(f)], ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_core_does_no_io(path):
    heavy = {m.split(".")[0] for m in _imports(path)} & IO_MODULES
    # spec.py reads the OS user as the default owner and loader.py the user's job file;
    # nothing else in the core may touch the OS
    allowed = {"os"} if path.name in ("spec.py", "loader.py") else set()
    assert heavy <= allowed, f"{path.name} imports {heavy - allowed}"


@pytest.mark.parametrize("path", _files("gqa/services") + _files("gqa/scheduling") + _files("gqa/models"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_services_and_core_never_import_adapters_or_entry_points(path):
    bad = {m for m in _imports(path) if m.startswith(("gqa.adapters", "cli", "lambdas", "infra", "boto3", "daemon"))}
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", _files("gqa/adapters"), ids=lambda p: str(p.relative_to(ROOT)))
def test_adapters_never_import_services(path):
    bad = {m for m in _imports(path) if m.startswith(("gqa.services", "cli", "lambdas", "daemon"))}
    assert not bad, f"{path.name} imports {bad}"


def test_runtime_imports_nothing_else_of_gqa():
    for path in _files("gqa/runtime"):
        bad = {m for m in _imports(path) if m.startswith("gqa.") and not m.startswith("gqa.runtime")}
        assert not bad, f"{path.name} imports {bad}"


def test_entry_points_import_without_the_cdk_extra():
    import app  # noqa: F401
    import infra  # noqa: F401
    import lambdas  # noqa: F401


@pytest.mark.parametrize("path", _files("gqa/models"), ids=lambda p: str(p.relative_to(ROOT)))
def test_models_are_the_bottom_of_the_core(path):
    """The models import nothing of gqa but models: the scheduler and services build on them."""
    bad = {m for m in _imports(path) if m.startswith("gqa.") and not m.startswith("gqa.models")}
    assert not bad, f"{path.name} imports {bad}"
