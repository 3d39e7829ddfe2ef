"""How the store splits its writes into TransactWriteItems: DynamoDB takes at
most 4 MB of items in one transaction, sized in UTF-8 bytes (not characters),
so jobs whose items are large, in wide characters, take several."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gqa.adapters.aws import history, writes
from gqa.adapters.aws import items as it
from gqa.models.job import JobState, transition
from tests.aws.aws_limits import TRANSACTION_BYTES
from tests.contract.jobs import T0, new_job

pytestmark = pytest.mark.aws

NOTE = "界" * 60_000        # 60,000 characters, 180,000 bytes


def cancelled(n: int) -> writes.JobWrite:
    """A queued job with a large spec, as read, and cancelled."""
    job = replace(new_job(spec_json=json.dumps({"note": NOTE}, ensure_ascii=False)), id=str(n), group=str(n))
    return writes.JobWrite(it.job_item(job, 1), transition(job, JobState.CANCELLED, T0 + 1, "cancelled"))


def test_jobs_whose_items_pass_4_mb_together_are_split_by_bytes_not_only_by_count():
    jobs = {str(n): cancelled(n) for n in range(40)}      # 40 items, but 7.2 MB of them

    groups = writes.pack(jobs)

    assert [job_id for group in groups for job_id in group] == list(jobs)
    assert len(groups) > 1
    for group in groups:
        assert sum(history.item_bytes(w.stored()[0]) for w in group.values()) <= TRANSACTION_BYTES


def test_a_large_arrays_puts_are_split_by_their_utf8_bytes():
    puts = [{"Put": {"TableName": "jobs", "Item": {"id": {"S": str(n)}, "note": {"S": NOTE}}}} for n in range(40)]

    chunks = list(writes.chunks(puts))

    assert sum(map(len, chunks)) == 40 and len(chunks) > 1
    for chunk in chunks:
        assert sum(len(put["Put"]["Item"]["note"]["S"].encode()) for put in chunk) <= TRANSACTION_BYTES
