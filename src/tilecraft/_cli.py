"""What every command module shares."""
from __future__ import annotations

import typer


def fail(message: str, code: int = 2) -> None:
    """A one-line ``error: ...`` on stderr and exit ``code`` (2: bad input): never a traceback."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
