"""`lakegc db`: create and show the metastore schema."""

from __future__ import annotations

import typer

from lakegc.cli.group import new_app
from lakegc.cli.options import state

app = new_app("Metastore schema.")


@app.command("init", epilog="Example: lakegc --metastore postgresql+psycopg://gc@db/lakegc db init")
def init(ctx: typer.Context) -> None:
    """Create or migrate the metastore schema."""
    st = state(ctx)
    version = st.creating_lake.metastore.init()
    typer.echo(f"metastore ready (schema version {version})")


@app.command("schema", epilog="Example: lakegc --metastore postgresql+psycopg://gc@db/lakegc db schema")
def schema(ctx: typer.Context) -> None:
    """Print the DDL of the metastore schema for this database."""
    typer.echo(state(ctx).lake.metastore.ddl(), nl=False)
