"""lakegc: garbage collection for versioned data lakes."""

__version__ = "0.4.0"
