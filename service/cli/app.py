"""The command line's shared parts: the typer apps, the consoles, options, errors and the API call wrapper.

Exit codes: 0 success, 1 failure, 2 bad input. ``--json`` prints one JSON document.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import httpx
import typer
import typer.core
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from service.client import ApiError, TokenError

if TYPE_CHECKING:  # the spec's pydantic models cost ~0.3 s to build: imported by the commands that read one
    from sweeps.spec import SweepSpec

# typer vendors click and exports only BadParameter of its exceptions: its base is click's UsageError (a bad option,
# argument or command; exit 2)
_UsageError = typer.BadParameter.__mro__[1]
assert _UsageError.__name__ == "UsageError", _UsageError


class _Commands(typer.core.TyperGroup):
    """The root command group. An error no command handled is one line on stderr, never a traceback or a box: a bad
    option or argument (click's usage errors, exit 2), a path that cannot be read or written (exit 2 when the path
    was given on the command line, naming its option; else 1), a malformed controller URL, a token that cannot be sent
    and settings the environment gets wrong (exit 2). Other exceptions are bugs and keep their traceback."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:  # the root's own options (groupscale --bogus)
            return super().make_context(info_name, args, parent, **extra)
        except _UsageError as e:
            _usage_error(e)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta["groupscale.argv"] = list(args)  # meta is shared with the subcommands' contexts
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as e:
            _usage_error(e)
        except httpx.InvalidURL as e:
            _fail(f"--url / GROUPSCALE_URL is not a valid URL: {e}", 2)
        except TokenError as e:
            _fail(f"GROUPSCALE_API_TOKEN: {e}", 2)
        except ValidationError as e:
            if e.title != "Settings":  # the environment's settings (service.settings); any other is a bug
                raise
            said = [f"GROUPSCALE_{str(d['loc'][-1]).upper()}: {d['msg'].removeprefix('Value error, ')}" for d in e.errors()]
            _fail("; ".join(said), 2)
        except OSError as e:
            if e.errno == errno.EPIPE:  # `groupscale ... | head`: typer's own handling (quiet, exit 1)
                raise
            _fail(*_path_error(e, ctx.meta.get("groupscale.argv", [])))


def _usage_error(e: Exception) -> NoReturn:
    """click's usage error in one line (exit 2), not its usage lines and box; a group called alone still shows its help."""
    if type(e).__name__ == "NoArgsIsHelpError":
        raise e
    where = getattr(e, "ctx", None)
    _fail(f"{e.format_message()} (see {where.command_path if where else 'groupscale'} --help)", 2)  # type: ignore[attr-defined]


def _path_error(e: OSError, argv: list[str]) -> tuple[str, int]:
    """(One line for an OSError, its exit code): ``--out r/x.html: No such file or directory (no folder r)``, exit 2
    when the path is a word of ``argv`` (its option named when it follows one); exit 1 for any other path."""
    if e.filename is None:
        return f"{e.strerror or e}", 1
    path = str(e.filename)
    given = next((i for i, word in enumerate(argv) if word == path or word.endswith(f"={path}")), None)
    parent = Path(path).parent
    why = f"{e.strerror}" + (f" (no folder {parent})" if isinstance(e, FileNotFoundError) and not parent.exists() else "")
    if given is None:
        return f"{path}: {why}", 1
    word = argv[given]
    option = (
        word.split("=", 1)[0] if word.startswith("-") else argv[given - 1] if given and argv[given - 1].startswith("-") else ""
    )
    return f"{option + ' ' if option else ''}{path}: {why}", 2


app = typer.Typer(help="groupscale: choose the GRPO group size G.", no_args_is_help=True, cls=_Commands)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"groupscale {version('groupscale')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("groupscale (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """groupscale: choose the GRPO group size G."""


law_app = typer.Typer(help="The group-size law, offline.", no_args_is_help=True)
app.add_typer(law_app, name="law")
models_app = typer.Typer(help="Built-in model presets.", no_args_is_help=True)
app.add_typer(models_app, name="models")
spec_app = typer.Typer(help="Sweep specs from other tools' configs.", no_args_is_help=True)
app.add_typer(spec_app, name="spec")
# Markup off: server and user text ("pip install 'groupscale[vllm]'", a sweep named "[x]") prints as it is; the few
# emphasised words pass markup=True with every value inside escaped (rich.markup.escape).
out = Console(markup=False)
err = Console(stderr=True, markup=False)
EXAMPLES = Path(__file__).resolve().parents[2] / "sweeps" / "examples"
TERMINAL = {"succeeded", "failed", "cancelled"}

UrlOpt = Annotated[str | None, typer.Option("--url", help="controller URL (default $GROUPSCALE_URL or http://127.0.0.1:8000)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document")]


def _fail(msg: str, code: int = 1) -> NoReturn:
    # whole lines: the terminal wraps, copies stay whole
    err.print(f"[red]error:[/red] {escape(msg)}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _api(fn, *args: Any) -> Any:
    """Call the API; 4xx input errors exit 2, other errors exit 1, each with the server's reasons."""
    try:
        return fn(*args)
    except ApiError as e:
        if e.status == 401:
            why = "GROUPSCALE_API_TOKEN is not the token it was started with" if e.token_sent else "set GROUPSCALE_API_TOKEN"
            _fail(f"token rejected (401) by the controller at {e.url}: {why}", 2)
        if e.status == 404 and not e.is_json:
            _fail(f"the server at {e.url} is not a groupscale controller (check --url / GROUPSCALE_URL)")
        if isinstance(e.detail, list):
            lines = [f"{'.'.join(str(p) for p in d.get('loc', []) if p != 'body')}: {d.get('msg')}" for d in e.detail]
            _fail("the server refused the input:\n  " + "\n  ".join(lines), 2)
        _fail(f"{e.detail} (HTTP {e.status})", 2 if e.status in (400, 404, 409, 413, 422) else 1)
    except httpx.HTTPError as e:
        _fail(f"cannot reach the controller ({e}); start it with `groupscale up` or set GROUPSCALE_URL")


def _ints(option: str, text: str) -> list[int]:
    """A comma-separated option as integers; anything else exits 2 naming the option."""
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        _fail(f"{option}: {text!r} is not a comma-separated list of integers, e.g. {'24,32' if 'group' in option else '3,4'}", 2)


def _print_json(doc: Any) -> None:
    typer.echo(json.dumps(doc, indent=2, allow_nan=False))


def _read_spec(spec_path: Path) -> SweepSpec:
    """Load and validate a spec file; bad input exits 2 with every field error."""
    from sweeps.spec import error_message, load_spec

    if not spec_path.is_file():
        _fail(f"SPEC.yaml: {spec_path} is {'a directory' if spec_path.is_dir() else 'not there'}; give a spec file", 2)
    try:
        return load_spec(spec_path)
    except ValidationError as e:
        lines = [f"{'.'.join(map(str, d['loc']))}: {error_message(d)}" for d in e.errors()]
        _fail(f"{spec_path} is not a valid sweep spec:\n  " + "\n  ".join(lines), 2)
    except Exception as e:  # noqa: BLE001 - YAML syntax and type errors alike are bad input
        _fail(f"{spec_path}: {e}", 2)
