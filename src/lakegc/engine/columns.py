"""The tables the pipeline's stages hand each other, each declared once as an Arrow schema.

Executors build these batches in Arrow; Spark is told the same columns as a DDL string (`ddl`), so
a table's columns are written down in one place:

    LISTING     what a listing found: address, size, mtime, slice (the folder task that found it),
                young (modified at or after the run's cutoff: never a candidate)
    CANDIDATES  what a run would delete, and why: address, size, mtime, reason
    DELETES     what a delete round did with each candidate: CANDIDATES + deleted, error
"""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")

LISTING = pa.schema(
    [
        ("address", pa.string()),
        ("size", pa.int64()),
        ("mtime", TIMESTAMP),
        ("slice", pa.string()),
        ("young", pa.bool_()),
    ]
)
CANDIDATES = pa.schema([("address", pa.string()), ("size", pa.int64()), ("mtime", TIMESTAMP), ("reason", pa.string())])
DELETES = pa.schema([*CANDIDATES, ("deleted", pa.bool_()), ("error", pa.string())])

_SPARK_TYPES = {
    pa.string(): "string",
    pa.int64(): "long",
    TIMESTAMP: "timestamp",
    pa.bool_(): "boolean",
    pa.binary(): "binary",
}


def ddl(schema: pa.Schema) -> str:
    """The schema as Spark's DDL (`address string, size long, ...`), for `mapInArrow` and readers."""
    return ", ".join(f"{field.name} {_SPARK_TYPES[field.type]}" for field in schema)
