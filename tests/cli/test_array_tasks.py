"""An array's task named Slurm's way, GROUP_INDEX (`gqa logs 1_1`, or
`gqa logs 1 --index 1`), by status, logs and cancel on both backends; an
index the array does not have is one line that says which it has."""

import pytest

OUT_OF_RANGE = "gqa: error: array 1 has no task 7: its 3 tasks are 0-2\n"


def test_status_logs_and_cancel_take_a_task_id(cli):
    cli("submit", "--array", "0-2", "--", "true")
    assert cli.json("status", "1_1")["id"] == "1_1"
    code, out, err = cli("logs", "1", "--index", "1")
    assert (code, err) == (0, "job 1_1 has no output yet (pending)\n")
    assert cli("cancel", "1_1")[:2] == (0, "cancelled 1_1\n")
    assert [j["status"] for j in cli.json("status", "1")["jobs"]] == ["pending", "cancelled", "pending"]


@pytest.mark.parametrize("args", [("status", "1_7"), ("logs", "1_7"), ("logs", "1", "--index", "7"),
                                  ("cancel", "1_0", "1_7"), ("hold", "1_7")])
def test_an_index_out_of_range_says_which_tasks_there_are(cli, args):
    cli("submit", "--array", "0-2", "--", "true")
    assert cli(*args) == (2, "", OUT_OF_RANGE)
    assert cli.json("status", "1")["counts"] == {"QUEUED": 3}      # nothing changed, 1_0 neither


@pytest.mark.parametrize("args, message", [
    (("logs", "1"), "1 is an array of 3 jobs; name one task as GROUP_INDEX: gqa logs 1_0 "
                    "(or gqa logs 1 --index 0); its tasks are 0-2"),
    (("logs", "1_2", "--index", "1"), "--index names a task of an array by its index (0 or more), given the "
                                      "array's id: gqa logs 1 --index 1, not 1_2 --index 1"),
    (("status", "2_0"), "job 2 is a single job, not an array; name it 2"),
])
def test_a_task_named_wrongly_is_told_how_to_name_it(cli, args, message):
    cli("submit", "--array", "0-2", "--", "true")
    cli("submit", "--", "true")
    assert cli(*args) == (2, "", f"gqa: error: {message}\n")


@pytest.mark.aws
@pytest.mark.slow
def test_on_aws_a_tasks_logs_status_and_cancel(aws):
    assert aws.json("alice", "submit", "--array", "0-2", "--", "python", "train.py")["count"] == 3
    aws.admit()
    started = {s.job_id: s for s in aws.dispatch()}
    aws.reconcile(started["1_1"], "RUNNING")
    aws.write_log(started["1_1"], "task one says hello")
    for args in (("logs", "1_1"), ("logs", "1", "--index", "1")):
        code, out, err = aws("alice", *args)
        assert code == 0 and out.splitlines()[1:] == ["task one says hello"], err
    assert aws.json("alice", "status", "1_1")["state"] == "RUNNING"
    for args in (("status", "1_7"), ("logs", "1", "--index", "7"), ("cancel", "1_7")):
        code, out, err = aws("alice", *args)
        assert (code, out) == (2, "") and OUT_OF_RANGE in err
    assert aws("alice", "cancel", "1_2")[:2] == (0, "cancelling 1_2 (stopping its processes)\n")
    assert [j["id"] for j in aws.json("alice", "status", "1")["jobs"] if j["state"] == "RUNNING"] == ["1_1"]
