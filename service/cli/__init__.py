"""The `groupscale` command line. Client commands call the HTTP API (GROUPSCALE_URL, GROUPSCALE_API_TOKEN).

app.py holds the typer apps and shared options; commands.py up and the sweep lifecycle; results.py the
answers (fit, trials, compare, report, recommend, probe); offline.py the ones
that need no server; render.py the tables and the progress bar; demo.py `groupscale demo`.
Exit codes: 0 success, 1 failure, 2 bad input. ``--json`` prints one JSON document.
"""

from service.cli import commands, demo, importers, offline, results  # noqa: F401  (each registers its commands on app)
from service.cli.app import app


def main() -> None:
    """The ``groupscale`` command (errors no command handled are one line: service.cli.app._Commands)."""
    app()


__all__ = ["app", "main"]
