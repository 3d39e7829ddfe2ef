"""The local queue's daemon: the local backend's composition root (a sibling
of lambdas/). It wires the SQLite store, the process executor and the
services, runs the control loop (gqa.services.supervisor.Supervisor.tick,
the same turn the AWS dispatch function runs) and serves the CLI's
requests on a Unix socket. `python -m daemon --help`."""
