"""A DynamoDB client whose secondary indexes lag behind the table, as they
may on AWS (index reads are eventually consistent): an index Query leaves
out the jobs of the last `lag` writes it has seen, until caught_up(). The
table's own reads (GetItem, BatchGetItem, a Query without IndexName) see
every write, as DynamoDB's strongly consistent reads do."""

from __future__ import annotations

from typing import Any

from gqa.adapters.aws import items as it
from gqa.adapters.aws.tables import ID


class LaggingIndex:
    def __init__(self, client: Any, lag: int):
        self.client, self.lag = client, lag
        self.writes: list[str] = []     # job ids, in the order written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def watch(self, *clients: Any) -> "LaggingIndex":
        """Record the jobs every write through these clients touches (this one's included)."""
        for client in (self.client, *clients):
            for operation in ("PutItem", "UpdateItem", "TransactWriteItems"):
                client.meta.events.register(f"before-call.dynamodb.{operation}", self._seen)
        return self

    def _seen(self, params: dict[str, Any], **_: Any) -> None:
        import json
        body = json.loads(params["body"])
        requests = [next(iter(a.values())) for a in body.get("TransactItems", [])] or [body]
        for request in requests:
            key = it.load(request.get("Key") or request.get("Item") or {})
            if ID in key and "#" not in str(key.get("grp", "")):   # a job, not a history item
                self.writes.append(key[ID])

    def hidden(self) -> set[str]:
        return set(self.writes[-self.lag:]) if self.lag else set()

    def caught_up(self) -> None:
        self.writes.clear()

    def query(self, **kwargs: Any) -> dict[str, Any]:
        out = self.client.query(**kwargs)
        if "IndexName" not in kwargs:
            return out
        hidden = self.hidden()
        kept = [i for i in out.get("Items", []) if i.get(ID, {}).get("S") not in hidden]
        return {**out, "Items": kept, "Count": len(kept)}


def lag(store: Any, writes: int, *watched: Any) -> LaggingIndex:
    """Make the store's index reads lag `writes` writes (its own and the watched clients')."""
    lagging = LaggingIndex(store.client, writes).watch(*watched)
    store.client = store.call.client = lagging
    return lagging
