"""A team's spend against its budget says one thing wherever it is shown: a held
job's reason (`gqa status`), `gqa cost`, `gqa top` and `gqa ui`, rounded down
alike, and a budget of $0 with nothing spent alike."""

import time

import pytest

from tests.services.conftest import Queue

PRICE = 2.0        # per GPU-hour


def views(cli) -> dict[str, dict[str, str]]:
    """Each team's "used" as gqa cost, gqa top and gqa ui show it."""
    from cli.backend import backend
    from cli.ui_view import page_data, read

    code, out, _ = cli("cost")
    assert code == 0
    cost = {line.split()[0]: line.split(maxsplit=6)[6] for line in out.splitlines()[2:] if line.strip()}
    code, out, _ = cli("top", "--once")
    assert code == 0
    rows = out.split("teams  ")[1].split("events")[0].splitlines()[2:]
    top = {row.split()[0]: row.split(maxsplit=4)[4] for row in rows}
    ui = {t["team"]: t.get("used_text") for t in page_data(read(backend()), source="here")["teams"]}
    return {"cost": cost, "top": top, "ui": ui}


def test_the_percentage_of_a_budget_is_rounded_down_alike_in_status_cost_top_and_ui(cli):
    queue = Queue(cli.store, 4)
    cli.json("local", "price", "--price", str(PRICE))
    ran = 41_717                                                  # 1 GPU at $2: $23.176, 2317.6% of $1
    queue.clock.advance(time.time() - ran - queue.clock.now())     # ended just now, by the CLI's clock
    spent = queue.start(team="vision", resources={"gpus": 1})
    queue.clock.advance(ran)
    queue.exit(spent.id, 0)
    cli("quota", "set", "vision", "--budget", "1")
    held = queue.submit_one(team="vision", limits={"wall_time": "1h"})
    queue.supervisor.dispatch()
    reason = cli.json("status", held.id)["reason"]
    assert reason == "team vision spent $23.18 of $1.00 this month (2317%)"
    assert {view: shown["vision"] for view, shown in views(cli).items()} == {
        "cost": "2317%", "top": "2317%", "ui": "2317%"}


@pytest.mark.parametrize("spend, used", [(0.0, "0%"), (1.0, "over 100%")])
def test_a_budget_of_nothing_reads_alike_in_cost_top_and_ui(cli, spend, used):
    """$0 with nothing spent is 0% used, as the budget's alerts and holds count it (none reached);
    any spend is over it."""
    queue = Queue(cli.store, 4)
    cli.json("local", "price", "--price", str(PRICE))
    queue.clock.advance(time.time() - queue.clock.now() - spend * 1800)
    job = queue.start(team="nlp", resources={"gpus": 1})
    queue.clock.advance(spend * 1800)                             # $2 an hour: `spend` dollars
    queue.exit(job.id, 0)
    cli("quota", "set", "nlp", "--budget", "0")
    assert {view: shown["nlp"] for view, shown in views(cli).items()} == {"cost": used, "top": used, "ui": used}


def test_wait_at_its_timeout_gives_a_pending_job_the_reason_status_gives_it(cli):
    """Not the reason stored when the budget held it: the budget changed since."""
    import json

    queue = Queue(cli.store, 4)
    cli.json("local", "price", "--price", str(PRICE))
    cli("quota", "set", "vision", "--budget", "1")
    held = queue.submit_one(team="vision", limits={"wall_time": "1h"})     # may cost $2: over $1
    queue.supervisor.dispatch()
    cli("quota", "set", "vision", "--budget", "1.5")                        # still over, by other numbers
    status = cli.json("status", held.id)["reason"]
    assert status.endswith("= $2.00, over $1.50 this period")
    code, out, _ = cli("wait", held.id, "--timeout", "1", "-o", "json")
    assert code == 124 and json.loads(out)["jobs"][0]["reason"] == status
