"""`gqa local price` and the prices `gqa local start` writes; `gqa cost`'s
GPU-hours per team and its costliest jobs on the local backend."""

import json

import pytest

from cli.local import _record_inventory
from gqa.adapters.local.paths import StatePaths
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu
from tests.services.conftest import Queue


def prices(cli) -> dict[int, float]:
    return {g.index: g.price for g in cli.store.inventory().gpus}


def test_prices_are_shown_and_set_per_type_and_for_the_rest(cli):
    cli.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g"), Gpu(1, "a10g"), Gpu(2, "t4")), cpus=8))
    assert [g["price"] for g in cli.json("local", "price")["gpus"]] == [0.0, 0.0, 0.0]
    data = cli.json("local", "price", "--price", "a10g=1.10", "--price", "0.5")
    assert [(g["type"], g["price"], g["how"]) for g in data["gpus"]] == [
        ("a10g", 1.1, "$1.1"), ("a10g", 1.1, "$1.1"), ("t4", 0.5, "$0.5")]
    assert prices(cli) == {0: 1.1, 1: 1.1, 2: 0.5}
    assert cli.store.inventory().cpus == 8                                   # the rest of the inventory kept
    code, out, err = cli("local", "price")
    assert code == 0 and "$1.1000" in out and "$0.5000" in out


def test_electricity_counts_each_gpus_power_limit_else_its_types_usual_power(cli, tmp_path, monkeypatch):
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps({"gpus": {"0": {"util": 0, "memory": 0, "power": 250}, "1": {"util": 0, "memory": 0}}}))
    monkeypatch.setenv("GQA_TEST_GPUS", str(gpus))
    cli.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g"), Gpu(1, "h100"), Gpu(2, "a10g"))))
    data = cli.json("local", "price", "--price", "1", "--kwh-price", "0.4")
    assert [g["price"] for g in data["gpus"]] == [1.1, 1.28, 1.12]           # 250 W read; 700 W, 300 W the table's
    assert data["gpus"][0]["how"] == "$1 + $0.4/kWh x 250 W (power limit) = $1.1"
    data = cli.json("local", "price", "--kwh-price", "0.4", "--watts", "a10g=100")
    assert [g["price"] for g in data["gpus"]] == [0.04, 0.28, 0.04]          # said beats read; no rent now


def test_a_bad_price_is_one_line_and_nothing_is_written(cli):
    cli.json("local", "price", "--price", "2")
    for args in (["--price", "abc"], ["--price", "-1"], ["--watts", "300"], ["--kwh-price", "-1"]):
        code, out, err = cli("local", "price", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and out == "", (args, err)
    assert set(prices(cli).values()) == {2.0}


def test_start_without_price_options_keeps_the_prices_the_queue_had(cli):
    cli.json("local", "price", "--price", "a10g=3")
    again = {"gpus": [{"index": i, "type": "a10g", "price": 0.0} for i in range(4)] + [
        {"index": 4, "type": "a10g", "price": 0.0}], "cpus": 8, "memory": None}
    _record_inventory(StatePaths(cli.home), again)                      # as `gqa local start` writes it
    assert prices(cli) == {0: 3.0, 1: 3.0, 2: 3.0, 3: 3.0, 4: 0.0}     # a new GPU has no price yet
    assert [g["price"] for g in again["gpus"]] == [3.0, 3.0, 3.0, 3.0, 0.0]   # what the daemon is handed


def test_cost_lists_gpu_hours_per_team_and_the_costliest_jobs(cli):
    queue = Queue(cli.store, 4)                                          # a fake clock in January 1970
    cli.json("local", "price", "--price", "2")
    big = queue.start(team="vision", resources={"gpus": 2})
    small = queue.start(team="nlp", resources={"gpus": 1})
    queue.clock.advance(1800)
    queue.exit(big.id, 0)
    queue.clock.advance(1800)
    queue.exit(small.id, 1)
    data = cli.json("cost", "--period", "1970-01", "--jobs", "1")
    assert [(t["team"], t["gpu_hours"], t["settled"]) for t in data["teams"]] == [("nlp", 1.0, 2.0),
                                                                                   ("vision", 1.0, 2.0)]
    assert [(j["id"], j["status"], j["gpu_hours"], j["cost"]) for j in data["jobs"]] == [(small.id, "failed", 1.0, 2.0)]
    code, out, _ = cli("cost", "--period", "1970-01", "--jobs", "5")
    assert code == 0 and "2.00 GPU-hours" in out and "costliest" in out and "vision" in out
    code, _, err = cli("cost", "--jobs", "5000")
    assert code == 2 and "--jobs" in err
    cli("quota", "set", "nlp", "--budget", "0")           # spent against nothing: no fraction, and valid JSON
    code, out, _ = cli("cost", "--period", "1970-01", "-o", "json")
    assert "Infinity" not in out and {t["team"]: t["used"] for t in json.loads(out)["teams"]}["nlp"] is None


@pytest.mark.parametrize("period, message", [
    ("9999-12", "period '9999-12' is outside 1970-01 to "),
    ("0000-01", "period '0000-01' is outside 1970-01 to "),
    ("1969-12", "period '1969-12' is outside 1970-01 to "),
    ("2026-13", "invalid period '2026-13': use a calendar month, e.g. 2026-11"),
])
def test_cost_of_a_month_out_of_range_is_one_line_and_exit_2(cli, period, message):
    code, out, err = cli("cost", "--period", period, "--jobs", "5")
    assert code == 2 and out == "" and err.startswith(f"gqa: error: {message}") and err.count("\n") == 1, err


def test_status_counts_a_running_attempts_cost_so_far_as_cost_and_history_do(cli):
    import time

    queue = Queue(cli.store, 4)
    cli.json("local", "price", "--price", "2")
    queue.clock.advance(time.time() - 1800 - queue.clock.now())   # started half an hour ago, by the CLI's clock
    job = queue.start(resources={"gpus": 2})
    status = cli.json("status", job.id)
    [costed] = cli.json("cost", "--jobs", "1")["jobs"]
    [listed] = cli.json("history")["jobs"]
    assert status["cost"] == pytest.approx(2 * 2.0 * 0.5, abs=0.01)        # 2 GPUs at $2 an hour for 30m
    assert status["cost"] == pytest.approx(costed["cost"], abs=0.01) == pytest.approx(listed["cost"], abs=0.01)
    assert status["gpu_seconds"] / 3600 == pytest.approx(listed["gpu_hours"], abs=0.01)
    code, out, _ = cli("status", job.id)
    assert code == 0 and "used       1.0" in out and ", $2.00 so far" in out


@pytest.mark.parametrize("settled, running, shown", [
    (0.035, 0.005, ("$0.04", "$0.01", "$0.05")),      # halves up, and the total is what the parts show
    (0.034, 0.004, ("$0.03", "$0.00", "$0.03")),
    (1.005, 2.005, ("$1.01", "$2.01", "$3.02")),      # 1.005 is stored as 1.00499...: round() gave $1.00
    (0.0, 0.0, ("$0.00", "$0.00", "$0.00")),
])
def test_a_teams_money_is_shown_to_the_cent_and_its_total_adds_up(settled, running, shown):
    from cli.cost import _total
    from cli.output import cents

    assert (f"${cents(settled):,.2f}", f"${cents(running):,.2f}", f"${_total(settled, running):,.2f}") == shown


def test_a_few_minutes_on_a_gpu_are_not_shown_as_no_gpu_hours():
    from cli.output import gpu_hours_text

    assert [gpu_hours_text(h) for h in (0.022, 0.004, 1234.5)] == ["0.02", "0.00", "1,234.50"]
