"""Job notices: which moves are told for which mail types, the --notify
option, the key, the words."""

import pytest

from gqa.models.errors import SpecError
from gqa.models.job import JobState as S
from gqa.models.notices import EVENT_OF_STATE, channel_of, job_notice, mail_types, notice_key, notify_option, selected
from tests.builders import history, job_record

# (notify.events, state entered, told?)
SELECTION = [
    (["begin"], S.RUNNING, True),
    (["begin"], S.SUCCEEDED, False),
    (["end"], S.SUCCEEDED, True),
    (["end"], S.FAILED, True),           # END is any end, as in Slurm
    (["end"], S.CANCELLED, True),
    (["end"], S.RUNNING, False),
    (["fail"], S.FAILED, True),
    (["fail"], S.TIMED_OUT, True),
    (["fail"], S.SUCCEEDED, False),
    (["fail"], S.CANCELLED, False),
    (["fail"], S.REJECTED, True),        # denied by an approver: it will never run
    (["end"], S.REJECTED, True),
    (["begin", "requeue"], S.REJECTED, False),
    (["time_limit"], S.TIMED_OUT, True),
    (["time_limit"], S.FAILED, False),
    (["requeue"], S.RETRY_WAIT, True),
    (["requeue"], S.FAILED, False),
    (["all"], S.RUNNING, True),
    (["all"], S.RETRY_WAIT, True),
    (["all"], S.QUEUED, False),          # not an event at all
    (["all"], S.STARTING, False),
    ([], S.FAILED, False),
]


@pytest.mark.parametrize("events,state,told", SELECTION)
def test_which_moves_are_told(events, state, told):
    assert selected(events, state, array_task=False) is told


def test_an_array_task_is_told_only_with_array_tasks():
    assert not selected(["end"], S.SUCCEEDED, array_task=True)
    assert selected(["end", "array_tasks"], S.SUCCEEDED, array_task=True)


@pytest.mark.parametrize("text,events,noted", [
    ("BEGIN,END", ["begin", "end"], []),
    ("begin, fail ,TIME_LIMIT_90", ["begin", "fail", "time_limit"], []),
    ("ALL,INVALID_DEPEND", ["all"], ["INVALID_DEPEND"]),
    ("END,NONE", [], []),
    ("END,ARRAY_TASKS", ["end", "array_tasks"], []),
    ("END,END", ["end"], []),
])
def test_slurm_mail_types(text, events, noted):
    assert mail_types(text) == (events, noted)


@pytest.mark.parametrize("text,notify", [
    ("end,fail", {"events": ["end", "fail"], "to": None}),
    ("begin,end:me@example.org", {"events": ["begin", "end"], "to": "me@example.org"}),
    ("fail:https://hooks.example.org/T1/B2", {"events": ["fail"], "to": "https://hooks.example.org/T1/B2"}),
    ("ALL:ana", {"events": ["all"], "to": "ana"}),
    ("none", {"events": [], "to": None}),          # Slurm's NONE: no notices, over a job file's
    ("NONE", {"events": [], "to": None}),
])
def test_notify_option(text, notify):
    assert notify_option(text) == notify


@pytest.mark.parametrize("text,error", [
    ("sometimes", "--notify 'SOMETIMES': use NONE, BEGIN"),
    ("none:ana", "name the events"),
    ("end:", "nothing after ':'"),
    ("stage_out", "gqa sends no STAGE_OUT notice"),
])
def test_notify_option_refuses(text, error):
    with pytest.raises(SpecError, match=error):
        notify_option(text)


@pytest.mark.parametrize("to", ["ftp://files.example.org/x", "a b", "ana\tb", "file:///etc/passwd"])
def test_a_recipient_that_is_none_of_address_user_or_webhook_is_refused(to):
    """It would have been taken for a user's name, and sent to the queue's default webhook or domain."""
    from gqa.models.loader import validate

    with pytest.raises(SpecError, match="is not an e-mail address, a user name or an http"):
        validate({"command": ["true"], "notify": {"events": ["end"], "to": to}})


@pytest.mark.parametrize("to, words", [
    ("http://127.0.0.1:abc/hook", "port must be a number from 1 to 65535"),
    ("http://127.0.0.1:70000/hook", "port must be a number from 1 to 65535"),
    ("https://hooks.example.org/caf\u00e9", "percent-encode"),
    ("https://hooks.example.org/100%", "%XX"),
    ("https:///services/T0", "names no host"),
    ("ana@@bad", "give one e-mail address"),
    ("mailto:ana@example.org", "give one e-mail address"),
    ("Ana <ana@example.org>", "no spaces"),
    ("ana@example.org,bob@example.org", "give one e-mail address"),
    ("ana@", "give one e-mail address"),
    ("ana;rm", "not an e-mail address (local@domain), a user name"),
])
def test_a_target_no_sender_can_use_is_refused_at_submission(to, words):
    from gqa.models.loader import validate

    with pytest.raises(SpecError, match="notify.to") as raised:
        validate({"command": ["true"], "notify": {"events": ["end"], "to": to}})
    assert words in str(raised.value)


@pytest.mark.parametrize("to", [
    "ana@example.org", "ana.b+gqa@lab.example.org", "ana@localhost", "ana", "ana.b-c", "svc_1",
    "https://hooks.slack.com/services/T0/B0/XXXX", "HTTP://intranet/hook", "http://127.0.0.1:8080/hook?x=1",
    "https://hooks.example.org/caf%C3%A9", "http://[::1]:9000/hook",
])
def test_the_documented_targets_are_taken(to):
    from gqa.models.loader import validate

    assert validate({"command": ["true"], "notify": {"events": ["end"], "to": to}}).notify.to == to


def test_no_events_selects_nothing():
    assert not any(selected([], state, array_task=False) for state in EVENT_OF_STATE)


@pytest.mark.parametrize("to,channel", [
    ("https://hooks.slack.com/services/T/B/x", "webhook"), ("HTTP://intranet/hook", "webhook"),
    ("ana@example.org", "email"), ("ana", "user"),
])
def test_channel_of(to, channel):
    assert channel_of(to) == channel


def test_a_failure_notice_names_the_job_its_outcome_and_the_attempt():
    job = job_record(id="12", spec={"name": "train", "owner": "ana", "team": "vision",
                                    "notify": {"events": ["end"], "to": "ana@example.org"}},
                     state=S.FAILED, exit_code=3, attempts=2, started_at=100.0, ended_at=3700.0, gpus=2,
                     gpu_seconds=7200.0)
    notice = job_notice(job, S.FAILED, 3700.0, "exited 3", 2)
    assert notice is not None
    assert notice.key == notice_key("12", 2, S.FAILED) == "12.2.failed"
    assert (notice.event, notice.to, notice.user, notice.team) == ("fail", "ana@example.org", "ana", "vision")
    assert notice.subject == "gqa: job 12 (train) failed (exit 3)"
    assert "attempt 2" in notice.text and "Reason: exited 3" in notice.text
    assert "Ran 1h00m on 2 GPUs; 2.00 GPU-hours in all." in notice.text
    assert notice.slack == {"text": notice.subject + "\n" + notice.text}


# three attempts of 2 GPUs: 10m, a retry's wait, 5m, a wait, 3m05s; each settlement added its GPU-seconds
RETRIED = history("SUBMITTED@0", "QUEUED@0", "RUNNING@100", "RETRY_WAIT@700", "QUEUED@760", "RUNNING@800",
                  "RETRY_WAIT@1100", "QUEUED@1160", "RUNNING@1200", "SUCCEEDED@1385")


@pytest.mark.parametrize("record, ran", [
    (dict(attempts=1, started_at=1200.0, ended_at=1385.0, gpu_seconds=370.0,
          history=history("SUBMITTED@0", "QUEUED@0", "RUNNING@1200", "SUCCEEDED@1385")),
     "Ran 3m05s on 2 GPUs; 0.10 GPU-hours in all."),
    (dict(attempts=3, started_at=1200.0, ended_at=1385.0, gpu_seconds=2 * 1085.0, history=RETRIED),
     "Ran 18m05s over its 3 attempts (the last 3m05s) on 2 GPUs; 0.60 GPU-hours in all."),
    # the record without its earliest transitions (moved out of a DynamoDB item): the GPU-seconds tell
    (dict(attempts=3, started_at=1200.0, ended_at=1385.0, gpu_seconds=2 * 1085.0, history=RETRIED[-2:]),
     "Ran 18m05s over its 3 attempts (the last 3m05s) on 2 GPUs; 0.60 GPU-hours in all."),
    # an earlier launch that never ran: one run, said as one
    (dict(attempts=2, started_at=1200.0, ended_at=1385.0, gpu_seconds=370.0),
     "Ran 3m05s on 2 GPUs; 0.10 GPU-hours in all."),
    # CPU-only, no transitions: nothing adds the earlier runs up, so the last is named as the last
    (dict(attempts=3, gpus=0, started_at=1200.0, ended_at=1385.0),
     "Its last attempt (of 3) ran 3m05s on 0 GPUs; 0.00 GPU-hours in all."),
])
def test_an_end_notice_tells_the_run_over_every_attempt(record, ran):
    job = job_record(spec={"notify": {"events": ["end"]}}, state=S.SUCCEEDED, **{"gpus": 2, **record})
    lines = job_notice(job, S.SUCCEEDED, 1385.0, "exit 0", job.attempts).text.splitlines()
    assert [line for line in lines if "ran" in line.lower()] == [ran]


def test_a_job_cancelled_before_it_started_is_not_told_of_as_attempt_0():
    job = job_record(spec={"name": "train", "notify": {"events": ["end"]}}, state=S.CANCELLED, ended_at=50.0)
    first = job_notice(job, S.CANCELLED, 50.0, "cancelled by alice", 0).text.splitlines()[0]
    assert first.endswith("was cancelled at 1970-01-01 00:00:50 UTC, before it started.")
    assert "attempt" not in first


def test_no_notice_for_a_job_that_asks_none_or_not_this_one():
    assert job_notice(job_record(), S.SUCCEEDED, 1.0, "", 1) is None
    asks_begin = job_record(spec={"notify": {"events": ["begin"]}})
    assert job_notice(asks_begin, S.SUCCEEDED, 1.0, "", 1) is None
    assert job_notice(asks_begin, S.RUNNING, 1.0, "", 1).subject.endswith("began")
