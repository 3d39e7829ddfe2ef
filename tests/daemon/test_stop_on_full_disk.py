"""A stop the store refuses (a full disk) leaves the jobs running, said in one line of the daemon's log."""

import logging
from types import SimpleNamespace

from daemon.loop import DaemonLoop, Stopping
from gqa.models.errors import StorageFull


class FullSupervisor:
    def shutdown(self, *, keep_jobs: bool):
        raise StorageFull("the disk holding /q/gqa.db is full; free space and retry: nothing was changed")


def test_a_stop_the_full_disk_refuses_is_one_line(caplog):
    wiring = SimpleNamespace(supervisor=FullSupervisor(), executor=SimpleNamespace(watched=lambda: 1))
    loop = DaemonLoop(wiring=wiring, server=None, doorbell=None, stopping=Stopping(requested=True))
    with caplog.at_level(logging.INFO, logger="gqa.daemon"):
        assert loop._shutting_down() is True
    [record] = [r for r in caplog.records if "could not ask running jobs to stop" in r.getMessage()]
    assert record.exc_info is None and "is full" in record.getMessage()
    assert "leaving them running for the next daemon" in record.getMessage()
