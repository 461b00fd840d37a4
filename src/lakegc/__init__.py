"""lakegc: garbage collection for versioned data lakes."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lakegc")  # the one version string: the package's metadata (pyproject.toml)
except PackageNotFoundError:  # imported from a source tree that was never installed (a zip on executors)
    __version__ = "0+unknown"
