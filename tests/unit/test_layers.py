"""The layers of docs/architecture.md: each layer imports only the layers
below it (the table LAYERS says which), the module graph has no cycle, the
pure core does no I/O, and no CLI code reaches into a store's database."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = ("gqa/models", "gqa/scheduling")
IO_MODULES = {"sqlite3", "subprocess", "socket", "boto3", "botocore", "selectors", "fcntl", "time", "os", "shutil"}
ENTRY_POINTS = ("cli", "daemon", "lambdas", "infra", "app")

# layer: (the modules it holds, the other layers it may import). A module belongs to the layer
# whose name is its longest prefix; a layer always imports itself. Everything of gqa must be in one.
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "models": (("gqa.models",), ()),
    "scheduling": (("gqa.scheduling",), ("models",)),
    "ports": (("gqa.ports",), ("models", "scheduling")),
    # the JSON of policy and inventory, read and written by stores, the daemon and the HTTP contract
    "codecs": (("gqa.settings_codec",), ("ports", "models", "scheduling")),
    "services": (("gqa.services",), ("ports", "models", "scheduling")),
    # runtime too: a job's checkpoints are laid out by the runtime that writes them, read here
    "adapters": (("gqa.adapters",), ("codecs", "ports", "models", "scheduling", "runtime")),
    # the HTTP contract: request and answer bodies, page tokens; the entry points serve it
    "http contract": (("gqa.http",), ("services", "codecs", "ports", "models", "scheduling")),
    "simulator": (("gqa.sim",), ("models", "scheduling")),
    # reports over a period, from JobSummary rows: for the CLI, the simulator's runs and the web page
    "reporting": (("gqa.reporting",), ("models", "scheduling")),
    # what runs inside a job's container: it ships alone, so it needs nothing else of gqa
    "runtime": (("gqa.runtime",), ()),
    "entry points": (ENTRY_POINTS, ("*",)),
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in ((ROOT / f).rglob("*.py") if (ROOT / f).is_dir() else [ROOT / f]))


GQA = _files("gqa")
MODULES = {_module(p): p for p in _files("gqa", "cli", "daemon", "lambdas")}


def _layer_of(name: str) -> str | None:
    best, layer = -1, None
    for candidate, (prefixes, _) in LAYERS.items():
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), candidate
    return layer


def _import_nodes(tree: ast.AST, *, deferred: bool):
    """The import statements run when the module loads, and with `deferred` those inside
    functions too; never those under `if TYPE_CHECKING:`, which never run."""
    def visit(node, top):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)) and (top or deferred):
                yield child
            yield from visit(child, top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                    ast.Lambda)))
    yield from visit(tree, True)


def _imports(path: Path, *, deferred: bool = True) -> set[str]:
    """The dotted names a file imports: `from a.b import c` gives a.b.c (a module or a name in a.b)."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found = set()
    for node in _import_nodes(ast.parse(path.read_text()), deferred=deferred):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:  # resolve relative imports against the file's package
            parts = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _module_imported(name: str) -> str | None:
    """The module of ours `name` lives in: the longest prefix that is a module."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in MODULES:
            return ".".join(parts[:end])
    return None


# -- directions ---------------------------------------------------------------------------------
def test_every_module_of_gqa_is_in_a_layer():
    loose = [str(p.relative_to(ROOT)) for p in GQA if p.name != "__init__.py" or p.parent != ROOT / "gqa"
             if _layer_of(_module(p)) is None]
    assert not loose, f"in no layer of LAYERS: {loose}"


def test_the_table_names_only_layers_it_defines():
    for layer, (_, allowed) in LAYERS.items():
        unknown = set(allowed) - set(LAYERS) - {"*"}
        assert not unknown, f"{layer} may import {unknown}, which LAYERS does not define"


@pytest.mark.parametrize("path", [p for p in GQA if _layer_of(_module(p))],
                         ids=lambda p: f"{_layer_of(_module(p))}:{p.relative_to(ROOT)}")
def test_each_layer_imports_only_what_the_table_allows(path):
    layer = _layer_of(_module(path))
    allowed = set(LAYERS[layer][1]) | {layer}
    bad = set()
    for name in _imports(path):
        target = _layer_of(name)
        if target is None and name.split(".")[0] == "gqa" and name != "gqa":
            target = "?"   # a part of gqa in no layer: as wrong as a layer it may not import
        if target is not None and target not in allowed and "*" not in allowed:
            bad.add(f"{name} ({target})")
    assert not bad, f"{layer} may import {sorted(allowed)}; {path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", [p for f in PURE for p in _files(f)], ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_core_does_no_io(path):
    heavy = {m.split(".")[0] for m in _imports(path)} & IO_MODULES
    # spec.py reads the OS user as the default owner and loader.py the user's job file (through
    # regular_file.py, which the light client shares); nothing else in the core may touch the OS
    allowed = {"os"} if path.name in ("spec.py", "loader.py", "regular_file.py") else set()
    assert heavy <= allowed, f"{path.name} imports {heavy - allowed}"


def test_entry_points_import_without_the_cdk_extra():
    import app  # noqa: F401
    import infra  # noqa: F401
    import lambdas  # noqa: F401


# -- cycles -------------------------------------------------------------------------------------
def _graph(*, deferred: bool) -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        targets = {_module_imported(i) for i in _imports(path, deferred=deferred)}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each a cycle or several."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while (w := stack.pop()) != v:
                part.append(w)
            if part:
                found.append(sorted([v, *part]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_when_modules_load():
    cycles = _cycles(_graph(deferred=False))
    assert not cycles, f"modules that import each other as they load: {cycles}"


def test_no_import_cycle_through_deferred_imports():
    cycles = _cycles(_graph(deferred=True))
    assert not cycles, f"modules that import each other, counting imports inside functions: {cycles}"


# -- the CLI and the stores ---------------------------------------------------------------------
SQL_CALLS = {"execute", "executemany", "executescript", "cursor", "fetchall", "fetchone"}


@pytest.mark.parametrize("path", _files("cli"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_cli_never_reaches_into_a_stores_database(path):
    """The CLI asks a store's port; SQL is the store's own business."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sqlite3" for a in node.names):
            bad.append(f"line {node.lineno}: imports sqlite3")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            bad.append(f"line {node.lineno}: imports sqlite3")
        elif isinstance(node, ast.Attribute) and node.attr in ("db", "_db", "conn") \
                and "store" in ast.unparse(node.value):
            bad.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            bad.append(f"line {node.lineno}: {ast.unparse(node.func)}()")
    assert not bad, f"{path.name} reaches into a database: {bad}"
