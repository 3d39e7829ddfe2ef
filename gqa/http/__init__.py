"""The HTTP contract: the JSON forms of requests and answers (`wire`) and the
pages of the long listings (`paging`), shared by the servers that answer it
(the api Lambda, the daemon on a shared box) and the clients that read it
(the CLI). Pure: dicts in, objects out.

It sits above the use cases and below the entry points: it imports the
models, the scheduler's value types, `gqa.settings_codec` and the result
types of `gqa.services`; only entry points (`lambdas/`, `daemon/`, `cli/`)
import it. Services and adapters never do."""
