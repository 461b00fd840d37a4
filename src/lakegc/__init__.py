"""lakegc: garbage collection for versioned data lakes.

    import lakegc

    run = lakegc.gc("lake", dry_run=True)        # lakegc.api: the Python API (see docs/api.md)

The API's names are importable from here; they load on first use, so `import lakegc` stays cheap
(Spark's Python workers import lakegc's modules without needing any of them).
"""


def _version() -> str:
    """The one version string: the package's metadata (pyproject.toml). Read when asked for, as
    the API is: importlib.metadata costs a command that never prints it a tenth of its start."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lakegc")
    except PackageNotFoundError:  # imported from a source tree that was never installed (a zip on executors)
        return "0+unknown"


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    import importlib

    if name == "__version__":
        globals()["__version__"] = found = _version()
        return found
    api = importlib.import_module("lakegc.api")
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'lakegc' has no attribute {name!r}")


def __dir__() -> list[str]:
    import importlib

    return sorted({*globals(), "__version__", *importlib.import_module("lakegc.api").__all__})
