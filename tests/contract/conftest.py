"""The JobStore contract runs once per backend. A backend is a factory that
opens a store object on one shared backing state: each call is another
connection (another process's view) onto the same jobs."""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gqa.adapters.local.store import SqliteStore
from gqa.ports import JobStore

OpenStore = Callable[[], JobStore]


def _sqlite(tmp_path: Path) -> OpenStore:
    path = tmp_path / "gqa.db"
    return lambda: SqliteStore(path)


# name -> (tmp_path -> factory). A DynamoDB backend on moto registers here too.
BACKENDS: dict[str, Callable[[Path], OpenStore]] = {
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def open_store(request, tmp_path) -> Iterator[OpenStore]:
    factory = BACKENDS[request.param](tmp_path)
    opened: list[JobStore] = []

    def open_one() -> JobStore:
        store = factory()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        close = getattr(store, "close", None)
        if close is not None:
            close()


@pytest.fixture
def store(open_store: OpenStore) -> JobStore:
    return open_store()
