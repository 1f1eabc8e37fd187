"""The ``tilecraft mi`` commands on a fresh Typer app, for the calculator's CLI tests."""
from __future__ import annotations

from collections.abc import Callable

import typer
from typer.testing import CliRunner

from tilecraft.cli_mi import register


def mi_invoker() -> Callable[..., object]:
    """``invoke("list", "mi250x")`` runs ``tilecraft mi list mi250x`` and returns the runner's result."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["mi", *args])
