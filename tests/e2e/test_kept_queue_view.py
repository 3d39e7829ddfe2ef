"""On a real daemon, `gqa queue` reads the view the daemon keeps while it is
current, and a job submitted a moment ago is listed at once: a view older
than the submit is never shown as the queue."""

import json
import time

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HOLD = ["sh", "-c", "while [ ! -e release ]; do sleep 0.05; done"]


def current_view(queue, timeout: float = 20.0) -> dict:
    """The kept view once the daemon has caught up with the store."""
    path = queue.home / "queue-view.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            view = json.loads(path.read_text())
            if view["revision"] == queue.backend.store.revision():
                return view
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError("the daemon did not keep the queue's view")


def test_gqa_queue_reads_the_daemons_view_and_never_a_stale_one_after_a_submit(make_queue):
    queue = make_queue(gpus=1)
    [blocker] = queue.submit(HOLD, limits={"wall_time": "1m"})
    queue.wait(blocker, states=("RUNNING",))
    queue.submit(["true"])
    view = current_view(queue)
    assert [r["id"] for r in view["running"]] == [blocker] and len(view["pending"]) == 1
    # the reasons marked, the stamp kept: what gqa queue prints comes from this file
    for row in view["pending"]:
        row["reason"] = "told by the kept view"
    (queue.home / "queue-view.json").write_text(json.dumps(view))
    assert "told by the kept view" in queue.cli("queue", check=True).stdout

    for n in range(5):   # each submit is listed by the very next command, whatever the daemon has kept
        queue.cli("submit", "--", "true", check=True)
        listed = queue.cli_json("queue")["pending"]
        assert len(listed) == 2 + n and all(p["reason"] != "told by the kept view" for p in listed)
    view = current_view(queue)
    assert len(view["pending"]) == 6
    assert [p["id"] for p in queue.cli_json("queue")["pending"]] == [r["id"] for r in view["pending"]]
    (queue.home / "release").touch()
