"""Use cases: submit, dispatch, supervise, cancel, requeue, quota, queries.
Services talk to the world only through the ports in gqa.ports."""
