"""The workstation backend: SQLite, child processes, a Unix socket to wake the daemon."""
