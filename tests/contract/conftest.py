"""The JobStore contract runs once per backend. A backend is a factory that
opens a store object on one shared backing state: each call is another
connection (another process's view) onto the same jobs."""

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from unittest import mock

import pytest

from gqa.adapters.local.store import SqliteStore
from gqa.ports import JobStore

OpenStore = Callable[[], JobStore]

# moto serves every call in-process; these keep any client away from real AWS
FAKE_AWS = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}


@contextmanager
def _sqlite(tmp_path: Path) -> Iterator[OpenStore]:
    path = tmp_path / "gqa.db"
    yield lambda: SqliteStore(path)


@contextmanager
def _dynamodb(tmp_path: Path) -> Iterator[OpenStore]:
    from moto import mock_aws

    from gqa.adapters.aws.dynamodb_store import DynamoDBStore
    from gqa.adapters.aws.tables import TableNames
    from tests.aws.deployed import create_tables
    from tests.aws.moto_support import SerializedClient, session

    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        names = TableNames.prefixed("gqa-test-")
        create_tables(session().client("dynamodb"), names)
        # each store gets its own client, as separate processes (Lambdas, the CLI) would
        yield lambda: DynamoDBStore(SerializedClient(session().client("dynamodb")), names)


# name -> (tmp_path -> context manager giving the factory; it tears the backend down on exit)
BACKENDS: dict[str, Callable[[Path], AbstractContextManager[OpenStore]]] = {
    "sqlite": _sqlite,
    "dynamodb": _dynamodb,
}
MARKS = {"dynamodb": [pytest.mark.aws]}


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, [])) for name in sorted(BACKENDS)])
def open_store(request, tmp_path) -> Iterator[OpenStore]:
    opened: list[JobStore] = []
    with BACKENDS[request.param](tmp_path) as factory:
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
