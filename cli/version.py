"""`gqa --version`: the installed package's version. Standard library only,
for the light client (cli/client.py) that answers it before any command loads."""


def version_line() -> str:
    """`gqa X.Y.Z`, as the installed package's metadata says."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"gqa {version('gqa')}"
    except PackageNotFoundError:        # run from a source tree that was never installed
        from gqa import __version__

        return f"gqa {__version__}"
