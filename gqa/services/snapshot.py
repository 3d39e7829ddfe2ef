"""Read the scheduler's snapshot from a store."""

from ..ports import JobStore
from ..scheduling import Snapshot


def read_snapshot(store: JobStore, now: float) -> Snapshot:
    inventory = store.inventory()
    policy = store.policy()
    pending, running = store.scheduling_view()
    return Snapshot(now=now, gpus=inventory.gpus if inventory else (), pending=tuple(pending),
                    running=tuple(running), teams=store.teams(), usage=store.usage(now, policy.half_life),
                    policy=policy, cpus=inventory.cpus if inventory else None,
                    memory=inventory.memory if inventory else None)
