"""Whether a process lives, by pid: what a lease's holder and the warm engine's record are checked by."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """The process exists (signal 0 reaches it, or it is someone else's and refuses it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
