"""Every test here synthesizes CDK stacks: marked `infra`."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/infra/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.infra)
