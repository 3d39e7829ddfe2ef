"""`gqa submit` on AWS sends the job's code: the spec's workdir (where `gqa
submit` ran, unless the spec or -D names another) as one bundle
(gqa.adapters.local.code_bundle), stored once under its SHA-256 in the
deployment's bucket, named in the spec as `code: sha256:...`. `--no-code`
sends none (the image holds the code); a spec that already names a bundle
keeps it. The local queue runs jobs in their workdir and needs no bundle;
it keeps a batch script's copy in the spec instead (JobSpec.script), which
AWS is not sent: its bundle holds the script as submitted."""

from __future__ import annotations

from typing import Any


def with_code(spec: Any, backend: Any, *, max_bytes: int, say=None) -> Any:
    """The spec as it goes to `backend`: with its bundle stored and named, where the backend takes one."""
    if getattr(backend, "local", True) or not hasattr(backend, "code_store") or spec.code is not None:
        return spec
    from gqa.adapters.local.code_bundle import build
    from gqa.models.units import format_size

    bundle = build(spec.workdir, max_bytes=max_bytes)   # refused past the limit before anything is sent
    done = backend.code_store().ensure(bundle.digest, bundle.data)
    if say is not None:
        say(f"code: {bundle.directory}, {bundle.files:,} files, {format_size(bundle.size)} compressed, "
            f"{done} ({bundle.digest[:19]}...)")
    return spec.model_copy(update={"code": bundle.digest})


def for_backend(spec: Any, backend: Any) -> Any:
    """The spec without its batch script's copy where the backend bundles code (AWS): the bundle, or the
    image, holds the script, and a queue message has no room to spare."""
    if not hasattr(backend, "code_store") or spec.script is None:
        return spec
    from gqa.models.loader import STDIN_PATH

    if spec.script.path == STDIN_PATH:   # no bundle holds it, and the copy is not sent
        from gqa.models.errors import SpecError

        raise SpecError("a script on stdin runs on the local queue only: save it to a file and submit that")
    return spec.model_copy(update={"script": None})
