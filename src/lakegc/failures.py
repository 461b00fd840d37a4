"""What went wrong, in one line: the cause a run records and the CLI's `error:` line names.

Failures inside Spark arrive wrapped. A Python error raised on an executor comes back as PySpark's
`PythonException`, whose message is "An exception was thrown from the Python worker:" followed by
the worker's traceback; a task the JVM gave up on (a worker that crashed, an executor lost) as a
Py4J or captured Java exception whose first line is "Job aborted due to stage failure: ... most
recent failure: Lost task ...: <the task's error>"; a JVM that died as a refused connection raised
inside Py4J; a Spark Connect server that went away as gRPC's status dump. `describe` digs the real
cause out of those texts (a pure function over the exception's class names and message); `cause`
applies it to an exception and masks any credential in it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import traceback
from collections.abc import Sequence

from lakegc.errors import first_line
from lakegc.redact import mask_secrets

MAX_LENGTH = 500
ON_EXECUTOR = " (on a Spark executor)"

_TRACEBACK = "Traceback (most recent call last):"
_HEADER = re.compile(r"(?P<type>[A-Za-z_][\w.$]*)(?::\s?(?P<message>.*))?")
_LOST_TASK = re.compile(r"most recent failure: Lost task [^:]*?\)(?: \([^)]*\))?: (?P<rest>.*)")
_CONNECT_GRPC = "pyspark.errors.exceptions.connect.SparkConnectGrpcException"
_CONNECTION_LOST = re.compile(r"StatusCode\.UNAVAILABLE")
_CONNECT_GONE = (
    "the Spark Connect server went away (StatusCode.UNAVAILABLE): a stopped or crashed engine, or the network"
)
_JAVA_CALL = re.compile(r"^An error occurred while calling [\w.]+\.\n: (?P<rest>.*)", re.DOTALL)


def describe(classes: Sequence[str], text: str, *, jvm_gone: bool = False) -> str:
    """One line naming the cause of an exception, given its classes (qualified names, most derived
    first, as in its MRO) and its message. `jvm_gone`: it was raised while talking to Spark's JVM
    over a connection that broke (the JVM was killed or crashed)."""
    text = text.strip()
    name = _short(classes[0]) if classes else "Exception"
    if jvm_gone or "py4j.protocol.Py4JNetworkError" in classes:
        return _cut(f"Spark's JVM is gone ({_with_type(name, first_line(text, MAX_LENGTH))})")
    if _TRACEBACK in text:  # a Python worker's traceback: its last exception is the cause
        return _cut(_python_error(text.rsplit(_TRACEBACK, 1)[1]) + ON_EXECUTOR)
    if classes and classes[0] == _CONNECT_GRPC and _CONNECTION_LOST.search(text):  # gRPC's multi-line dump
        return _CONNECT_GONE
    lost = _LOST_TASK.search(text)
    if lost:  # a task Spark gave up on, with the error of its last attempt
        return _cut(_java_error(lost["rest"]) + ON_EXECUTOR)
    call = _JAVA_CALL.match(text)
    if call:  # a Java exception thrown by a call into the JVM (Py4JJavaError)
        return _cut(_java_error(first_line(call["rest"], MAX_LENGTH)))
    if classes and classes[0].startswith("lakegc."):
        return _cut(text or name)  # our own errors are written to be read as they are
    return _cut(_with_type(name, first_line(text, MAX_LENGTH)))


def cause(exc: BaseException) -> str:
    """`describe` for a raised exception, credentials masked."""
    classes = [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__]
    return mask_secrets(describe(classes, str(exc), jvm_gone=jvm_gone(exc)))


def jvm_gone(exc: BaseException) -> bool:
    """Py4J lost its connection (it raises Py4JNetworkError, then a refused connection when it
    tries again), or the JVM PySpark started for this process has exited (Py4J may have logged the
    broken connection and raised something else, such as "... does not exist in the JVM")."""
    if (type(exc).__module__, type(exc).__name__) == ("py4j.protocol", "Py4JError") and _launched_jvm_exited():
        return True
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(c.__name__ == "Py4JNetworkError" for c in type(current).__mro__):
            return True
        frames = traceback.extract_tb(current.__traceback__)
        if isinstance(current, OSError) and frames and "/py4j/" in frames[-1].filename.replace("\\", "/"):
            return True
        current = current.__cause__ or current.__context__
    return False


def _launched_jvm_exited(grace: float = 1.0) -> bool:
    """The JVM PySpark launched (local and client mode; under spark-submit it is our parent, not
    our child) has exited, or does within `grace` seconds: a dying process closes its sockets
    before it can be waited for."""
    pyspark = sys.modules.get("pyspark")
    process = getattr(getattr(getattr(pyspark, "SparkContext", None), "_gateway", None), "proc", None)
    if process is None:
        return False
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        return False
    return True


def _python_error(block: str) -> str:
    """The exception a traceback ends with: its header line (the first one not indented after the
    frames) and the lines of its message, as `Type: message` (our own errors: the message)."""
    lines = block.strip("\n").split("\n")
    start = next((i for i, line in enumerate(lines) if line and not line[0].isspace()), None)
    if start is None:
        return "an unknown error"
    message = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.strip() or line[0].isspace():
            break  # the JVM's own lines follow a worker's traceback in its text
        message.append(line)
    header = _HEADER.fullmatch(" ".join(message))
    if header is None:
        return " ".join(message)
    if header["type"].startswith("lakegc.") and header["message"]:
        return header["message"]
    return _with_type(_short(header["type"]), header["message"] or "")


def _java_error(line: str) -> str:
    """`org.apache.spark.SparkException: msg` as `SparkException: msg`."""
    header = _HEADER.fullmatch(line.strip())
    if header is None or "." not in header["type"]:
        return line.strip()
    return _with_type(_short(header["type"]), header["message"] or "")


def _with_type(name: str, message: str) -> str:
    return f"{name}: {message}" if message else name


def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LENGTH else line[: MAX_LENGTH - 3] + "..."
