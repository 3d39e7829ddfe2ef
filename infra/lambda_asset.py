"""The functions' code, built in Python without Docker: lambdas/ and the parts
of gqa/ the handlers import, plus their runtime dependencies installed from
wheels built for the functions' platform (Linux on arm64, CPython 3.12).

The versions are the ones installed where the app is synthesized (the
environment the tests ran in), so the functions run what the tests ran.

The folder is cached under build/lambda-asset/<key>, the key a hash of the
sources, the pinned requirements and this recipe: a synth with nothing
changed copies nothing and calls pip not at all, and the asset's hash is the
key (no fingerprinting of thousands of files at every synth). A folder is
built under a temporary name and renamed into place, so two synths at once
never see half a folder; a new folder prunes the older ones."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path

from aws_cdk import AssetHashType
from aws_cdk import aws_lambda

from . import ROOT, DeploymentError

RUNTIME = aws_lambda.Runtime.PYTHON_3_12
ARCHITECTURE = aws_lambda.Architecture.ARM_64     # Graviton: about 20% cheaper per GB-second than x86
PYTHON_VERSION = "3.12"                            # RUNTIME's, for pip's --python-version
# Wheels for glibc 2.17 (manylinux2014) up to 2.34, the glibc of Amazon Linux 2023 that the
# python3.12 runtime runs on. pip takes each tag literally, so every one is listed.
PLATFORMS = ("manylinux2014_aarch64", *(f"manylinux_2_{minor}_aarch64" for minor in range(17, 35)))

# What the handlers import that the Lambda runtime does not provide (PyYAML: the spec
# loader). boto3 and botocore are bundled too although the runtime has them: the
# runtime's copy is older and changes when AWS updates it, while the adapters' retry
# and error handling are tested against the version pinned here (it adds about 35 MB,
# well within Lambda's 250 MB). sortedcontainers: the scheduling pass's index.
DISTRIBUTIONS = ("pydantic", "PyYAML", "aws-lambda-powertools", "boto3", "sortedcontainers")

SOURCES = ("lambdas", "gqa")
# the local daemon's adapters and the simulator: no handler imports them
EXCLUDED_DIRS = frozenset({"gqa/adapters/local", "gqa/sim"})
SKIPPED_NAMES = frozenset({"__pycache__", "tests", ".pytest_cache"})
CACHE = ROOT / "build" / "lambda-asset"
STALE_TEMPORARY = 3600.0     # seconds: a temporary folder this old was left by a synth that died

Installer = Callable[[Path, Sequence[str], Path], None]


class AssetBuildError(DeploymentError):
    """The functions' folder could not be built; the message is one line."""


def function_code(*, installer: Installer | None = None) -> aws_lambda.Code:
    """The functions' code: the cached folder, its hash the cache key."""
    folder = build_asset(installer=installer)
    return aws_lambda.Code.from_asset(str(folder), asset_hash=folder.name, asset_hash_type=AssetHashType.CUSTOM)


def build_asset(*, root: Path = ROOT, cache: Path | None = None, installer: Installer | None = None) -> Path:
    """The folder for the current sources and requirements, built if missing."""
    cache = cache or (CACHE if root == ROOT else root / "build" / "lambda-asset")
    requirements = pinned_requirements()
    constraints = pinned_constraints()
    files = sorted(source_files(root))
    key = cache_key(root, files, requirements, constraints)
    final = cache / key
    if final.is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=cache))
    try:
        folder = work / "asset"
        for relative in files:
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / relative, target)
        constraint_file = work / "constraints.txt"
        constraint_file.write_text("".join(f"{line}\n" for line in constraints))
        (installer or pip_install)(folder, requirements, constraint_file)
        shutil.rmtree(folder / "bin", ignore_errors=True)    # console scripts: nothing runs them on Lambda
        _make_readable(folder)
        try:
            os.rename(folder, final)
        except OSError:
            if not final.is_dir():    # not a concurrent synth that got there first
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _prune(cache, keep=final)
    return final


def source_files(root: Path) -> Iterator[Path]:
    """The files of lambdas/ and gqa/ the functions ship, relative to root."""
    for top in SOURCES:
        for folder, dirs, names in os.walk(root / top):
            here = Path(folder).relative_to(root)
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_NAMES and (here / d).as_posix() not in EXCLUDED_DIRS)
            yield from (here / name for name in names if not name.endswith((".pyc", ".pyo")))


def cache_key(root: Path, files: Sequence[Path], requirements: Sequence[str], constraints: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for part in (Path(__file__).read_bytes(), "\n".join(requirements).encode(), "\n".join(constraints).encode(),
                 " ".join((PYTHON_VERSION, *PLATFORMS)).encode()):
        digest.update(hashlib.sha256(part).digest())
    for relative in files:
        digest.update(relative.as_posix().encode() + b"\0" + hashlib.sha256((root / relative).read_bytes()).digest())
    return digest.hexdigest()[:32]


def pinned_requirements() -> list[str]:
    """DISTRIBUTIONS at the versions installed here."""
    return [f"{name}=={_version(name)}" for name in DISTRIBUTIONS]


def pinned_constraints() -> list[str]:
    """Every installed distribution DISTRIBUTIONS depend on, at its installed version: pip
    resolves for the target platform, but never to a version the tests did not run."""
    seen: dict[str, str] = {}
    pending = list(DISTRIBUTIONS)
    while pending:
        name = _normal(pending.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue    # a dependency of another platform or Python: pip picks it for the target
        seen[name] = dist.version
        for requirement in dist.requires or ():
            if re.search(r"\bextra\s*==", requirement):
                continue    # an optional extra, not installed with the distribution
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
            if match:
                pending.append(match.group(0))
    return [f"{name}=={version}" for name, version in sorted(seen.items())]


def pip_install(target: Path, requirements: Sequence[str], constraints: Path) -> None:
    """Install the requirements' wheels for the functions' platform into target."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
               "--no-compile", "--only-binary=:all:", *(f"--platform={p}" for p in PLATFORMS),
               f"--python-version={PYTHON_VERSION}", "--implementation=cp", f"--target={target}",
               f"--constraint={constraints}", *requirements]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AssetBuildError(_failed(requirements, f"pip did not run: {exc}")) from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines()
                 if line.strip() and not line.startswith("WARNING")]
        raise AssetBuildError(_failed(requirements, lines[-1] if lines else f"pip exited {done.returncode}"))


def _failed(requirements: Sequence[str], why: str) -> str:
    return (f"cannot build the Lambda functions' code: installing {', '.join(requirements)} for "
            f"linux-aarch64 CPython {PYTHON_VERSION} failed ({why}); PyPI must be reachable, or "
            f"{CACHE.relative_to(ROOT)}/ filled by a synth on a machine that reaches it")


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        raise AssetBuildError(f"{name} is not installed here: install gqa[aws] so the functions bundle the "
                              f"versions the tests ran") from None


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _make_readable(folder: Path) -> None:
    """Lambda runs the code as another user: files 644, folders 755, whatever the umask."""
    os.chmod(folder, 0o755)
    for here, dirs, names in os.walk(folder):
        for d in dirs:
            os.chmod(os.path.join(here, d), 0o755)
        for name in names:
            os.chmod(os.path.join(here, name), 0o644)


def _prune(cache: Path, *, keep: Path) -> None:
    """Remove the folders of older sources, and temporary folders a dead synth left."""
    for entry in cache.iterdir():
        if entry == keep or not entry.is_dir():
            continue
        if entry.name.startswith(".tmp-"):
            try:
                if time.time() - entry.stat().st_mtime < STALE_TEMPORARY:
                    continue    # another synth is building it now
            except FileNotFoundError:
                continue
        # renamed aside first: a synth that checks for it meanwhile rebuilds rather than reading half a folder
        aside = cache / f".tmp-prune-{uuid.uuid4().hex}"
        try:
            os.rename(entry, aside)
        except OSError:
            continue
        shutil.rmtree(aside, ignore_errors=True)
