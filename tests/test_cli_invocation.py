"""The command line written at the top of every report is the one the user typed."""

from pathlib import Path

import typer
from typer.testing import CliRunner

from gepard.cli import invocation


def test_invocation_repeats_the_given_options_and_flags_as_typed():
    app = typer.Typer()
    seen = []

    @app.command("report")
    def report(ctx: typer.Context, sessions: str = typer.Option("16"), trace: bool = typer.Option(False, "--trace"),
               plot: bool = typer.Option(True, "--plot/--no-plot"), duration: float = typer.Option(120.0),
               model: list[Path] = typer.Option(None, "--model")):
        seen.append(invocation(ctx))

    @app.command("other")
    def other():
        pass

    r = CliRunner().invoke(app, ["report", "--sessions", "16,32", "--trace", "--no-plot", "--model", "a", "--model", "b"])
    assert r.exit_code == 0, r.output
    assert seen == ["gepard report --sessions 16,32 --trace --no-plot --model a --model b"]
