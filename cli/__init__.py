"""The `gqa` command. Each command is a module; they import heavy things
(pydantic, sqlite, rich) inside the command so `gqa --help` stays fast."""
