"""The demo's scheduling checks judge start times, and a job that never
started (no start time) fails its check instead of ending the demo."""

from dataclasses import replace

from cli.demo_run import _interleaved, _started_first


def test_the_high_job_starting_before_the_queued_low_jobs_passes():
    ok, detail = _started_first({"h": 10.0, "l1": 12.0, "l2": 13.5}, "h", ["l1", "l2"])
    assert ok and detail == "high started -2.0s relative to the first queued low job"


def test_a_low_job_starting_before_the_high_job_fails():
    ok, detail = _started_first({"h": 10.0, "l1": 9.0, "l2": 13.5}, "h", ["l1", "l2"])
    assert not ok and "1.0s" in detail


def test_a_high_job_that_never_started_fails_and_says_so():
    assert _started_first({"h": None, "l1": 12.0}, "h", ["l1"]) == (False, "the high job never started")


def test_low_jobs_that_never_started_are_left_out_of_the_comparison():
    ok, detail = _started_first({"h": 10.0, "l1": None, "l2": 11.0}, "h", ["l1", "l2"])
    assert ok and "1.0s" in detail


def test_bursts_that_alternate_interleave():
    vision, nlp = ["v1", "v2", "v3", "v4"], ["n1", "n2", "n3", "n4"]
    starts = {"v1": 1.0, "n1": 2.0, "v2": 3.0, "n2": 4.0, "v3": 5.0, "n3": 6.0, "v4": 7.0, "n4": 8.0}
    assert _interleaved(starts, vision, nlp) == (True, "start order VNVNVNVN")


def test_one_burst_after_the_other_does_not_interleave():
    vision, nlp = ["v1", "v2", "v3"], ["n1", "n2", "n3"]
    starts = {"v1": 1.0, "v2": 2.0, "v3": 3.0, "n1": 4.0, "n2": 5.0, "n3": 6.0}
    assert _interleaved(starts, vision, nlp) == (False, "start order VVVNNN")


def test_a_burst_job_that_never_started_fails_the_interleaving_and_is_counted():
    vision, nlp = ["v1", "v2", "v3", "v4"], ["n1", "n2", "n3", "n4"]
    starts = {"v1": 1.0, "n1": 2.0, "v2": 3.0, "n2": 4.0, "v3": 5.0, "n3": 6.0, "v4": 7.0, "n4": None}
    assert _interleaved(starts, vision, nlp) == (False, "start order VNVNVNV; 1 never started")


def _report_of(jobs, figures=None):
    from gqa.models.accounting import summarise
    from gqa.reporting import FIGURES, ReportInput, build, html_page

    built = build(ReportInput([summarise(j, 500.0) for j in jobs], since=0.0, until=1000.0, now=500.0))
    return built, html_page(built, {n: b"png" for n in FIGURES} if figures is None else figures)


def _ended(id, state, gpu_seconds=360.0):
    """A job that ran 20-300 and cost $2 a GPU-hour of its `gpu_seconds`."""
    from gqa.models.job import JobState, Transition
    from tests.builders import job_record

    return job_record(id=id, state=JobState(state), submitted_at=10.0, gpu_seconds=gpu_seconds, ended_at=300.0,
                      cost=2.0 * gpu_seconds / 3600,
                      history=(Transition(JobState.QUEUED, 10.0, ""), Transition(JobState.RUNNING, 20.0, ""),
                               Transition(JobState(state), 300.0, "")))


def test_the_report_check_passes_when_the_report_counts_the_jobs():
    from cli.demo_run import _report_matches

    jobs = [_ended("1", "SUCCEEDED"), _ended("2", "FAILED"), _ended("3", "SUCCEEDED", 720.0)]
    built, page = _report_of(jobs)
    ok, detail = _report_matches(built, jobs, page)
    assert ok, detail
    assert detail == ("3 of 3 jobs, 2 succeeded and 1 failed (the jobs say 2 and 1), 0.4000 of 0.4000 GPU-hours, "
                      "$0.8000 of $0.8000 spent, 6 of 6 figures embedded")


def test_the_report_check_fails_on_a_job_it_missed_or_a_figure_not_embedded():
    from cli.demo_run import _report_matches

    jobs = [_ended("1", "SUCCEEDED"), _ended("2", "FAILED")]
    built, page = _report_of(jobs[:1])
    ok, detail = _report_matches(built, jobs, page)
    assert not ok and detail.startswith("1 of 2 jobs")
    free = [replace(j, cost=0.0) for j in jobs]          # nothing priced: the spend check cannot pass
    built, page = _report_of(free)
    ok, detail = _report_matches(built, free, page)
    assert not ok and "$0.0000 of $0.0000 spent" in detail
    built, page = _report_of(jobs, figures={})
    ok, detail = _report_matches(built, jobs, page)
    assert not ok and detail.endswith("0 of 6 figures embedded")
