"""What every command module shares."""
from __future__ import annotations

import os
from pathlib import Path

import typer


def fail(message: str, code: int = 2) -> None:
    """A one-line ``error: ...`` on stderr and exit ``code`` (2: bad input): never a traceback."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def check_out(out: Path | None, option: str = "--out", folder: bool = False) -> None:
    """Fail now (nothing is created) where ``out`` could not be written at the end of a long run: a ``folder``
    that exists as a file, or a path whose first existing ancestor is not a folder this process may write
    into. A JSON path may be an existing folder (the results file goes inside it)."""
    if out is None:
        return
    if out.exists():
        if folder and not out.is_dir():
            fail(f"{option} {out}: exists and is not a folder")
        target = out if out.is_dir() else out.parent
        if not os.access(target, os.W_OK | os.X_OK) or (out.is_file() and not os.access(out, os.W_OK)):
            fail(f"{option} {out}: not writable")
        return
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        fail(f"{option} {out}: cannot be made ({parent} is not a writable folder)")
