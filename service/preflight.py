"""Checks that need the deployment (settings, cluster, files) and so cannot live in the spec model."""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.scheduler.placement import bundles_on, fits, shape
from service.settings import Settings

if TYPE_CHECKING:
    from sweeps.answer import AnswerPlan
from sweeps.engines import get_engine
from sweeps.prompt_template import prompt_template_error
from sweeps.spec import DEFAULT_EVAL_FRACTION, DatasetTaskSpec, ResourcesSpec, SweepSpec
from workers.entry import (
    DatasetError,
    answer_paths,
    check_answers_here,
    check_rows,
    load_rows,
    math_verify_available,
    model_config_error,
    read_prompt_answer_lines,
    term_names,
)

log = logging.getLogger("groupscale.preflight")


class SpecError(ValueError):
    """A spec the deployment cannot run. loc: field path as in pydantic errors."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc, self.msg = loc, msg


def preflight(
    spec: SweepSpec, settings: Settings, nodes: list[dict[str, float]] | None, processes: int | None = None
) -> list[str]:
    """Raise SpecError for the first problem found; return the warnings (what is accepted but likely a mistake)
    when the sweep can run.

    Args:
        nodes: each alive node's total resources ({"CPU": .., "GPU": ..}), or None when the cluster is unknown
            (the resource check is skipped, as it is with ``settings.autoscaling``).
        processes: the processes the work runs on, when not resources.num_processes (1: a probe or an answer).
    """
    if spec.n_trials > settings.max_trials:
        raise SpecError(
            ("seeds",),
            f"the sweep has {spec.n_trials} trials (G x B x seeds); this server accepts "
            f"at most {settings.max_trials} (GROUPSCALE_MAX_TRIALS)",
        )
    if spec.steps > settings.max_steps:
        raise SpecError(
            ("steps",),
            f"steps={spec.steps}; this server accepts at most {settings.max_steps} steps per trial (GROUPSCALE_MAX_STEPS)",
        )
    if nodes is not None and not settings.autoscaling:  # a shape no node holds would leave a trial pending forever
        check_fits(spec.resources, nodes, processes)
    if spec.task.name == "jsonl":
        check_under_root(spec.task.path, settings.data_root, ("task", "path"), "data", "GROUPSCALE_DATA_ROOT")
        check_task_file(spec.task.path)
    warnings = check_dataset_task(spec.task, settings) if spec.task.name == "dataset" else []
    if spec.model.path is not None:
        check_model_folder(spec.model.path, settings.model_root)
    check_engine_here(spec)
    return warnings


def check_engine_here(spec: SweepSpec) -> None:
    """What the spec's engine checks with the controller's packages (sweeps.engines: engine trl reads the recipe with
    the installed TRL). Raises SpecError naming the field its message starts with (``trl.beta: ...``, ``engine: ...``)."""
    try:
        get_engine(spec.engine).check_here(spec)
    except ValueError as e:
        head, _, rest = str(e).partition(": ")
        named = bool(rest) and head.replace(".", "").replace("_", "").isalnum()  # a field path such as trl.beta
        loc = tuple(head.split(".")) if named else ("engine",)
        raise SpecError(loc, rest if loc == ("engine",) and named else str(e)) from None


def check_under_root(path: str, root: Path | None, loc: tuple[str | int, ...], what: str, variable: str) -> Path:
    """The resolved ``path`` (links and ``..`` followed) lies under ``root`` when one is set. Returns it."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, ValueError, RuntimeError):
        raise SpecError(loc, "the path cannot be resolved on the controller") from None
    if root is not None and not resolved.is_relative_to(root.expanduser().resolve()):
        raise SpecError(
            loc,
            f"{path[:200]!r} is outside the {what} root {str(root.expanduser().resolve())!r} ({variable}); "
            "allowed: paths under it",
        )
    return resolved


def check_fits(res: ResourcesSpec, nodes: list[dict[str, float]], processes: int | None = None) -> None:
    """A trial's processes fit the alive nodes: one process of ``cpus_per_process`` CPUs and ``gpus_per_process`` GPUs
    on one node (Ray places its bundle there), P of them over the nodes together (a placement group's bundles).
    ``processes``: how many the work runs on, when not num_processes (a probe or an answer runs on one).
    Raises SpecError naming the field over the largest node (most GPUs, then CPUs; by the name the spec gave it,
    ResourcesSpec.named) and that node."""
    cpus, gpus, p = res.cpus_per_process, res.gpus_per_process, processes or res.num_processes
    if fits(nodes, p * cpus, p * gpus, p):
        return
    largest = max(nodes, key=lambda n: (n.get("GPU", 0.0), n.get("CPU", 0.0)), default={})
    have_cpus, have_gpus = largest.get("CPU", 0.0), largest.get("GPU", 0.0)
    described = shape(have_cpus, have_gpus) if have_gpus or not gpus else f"{shape(have_cpus, 0)} and no GPU"
    if p > 1 and fits(nodes, cpus, gpus):  # each process fits a node; all of them do not
        room = sum(bundles_on(n, cpus, gpus) for n in nodes)
        raise SpecError(
            ("resources", "num_processes"),
            f"num_processes={p} of {shape(cpus, gpus)} each do not fit the cluster ({len(nodes)} alive nodes hold "
            f"{room} such processes; its largest node has {described}); allowed: 1 to {room}, or smaller processes "
            "(GROUPSCALE_AUTOSCALING=1 lets a trial wait for an autoscaler's nodes)",
        )
    unit = "process" if p > 1 or processes else "trial"
    cpus_name, gpus_name = res.named("cpus"), res.named("gpus")
    field = gpus_name if gpus > have_gpus else cpus_name
    most = max((n.get("CPU", 0.0) for n in nodes if n.get("GPU", 0.0) >= gpus), default=0.0)
    if field.startswith("cpus"):
        allowed = f"allowed: more than 0 to {most:g}"
    else:
        allowed = f"allowed: 0 to {have_gpus:g}" if have_gpus else "allowed: 0 (no node of the cluster has a GPU)"
    raise SpecError(
        ("resources", field),
        f"{cpus_name}={cpus:g} and {gpus_name}={gpus:g} fit no node of the cluster ({len(nodes)} alive); its "
        f"largest node has {described}; {allowed} (a {unit} runs on one node; "
        "GROUPSCALE_AUTOSCALING=1 lets it wait for an autoscaler's node)",
    )


def check_dataset_task(task: DatasetTaskSpec, settings: Settings) -> list[str]:
    """Data files under GROUPSCALE_DATA_ROOT and readable, the columns there, the splits non-empty;
    reward functions enabled, under GROUPSCALE_REWARD_ROOT and binding NAME (found without running the file;
    service.cluster_checks runs them). Returns warnings: prompts that hold their own answer (leaked_answers)."""
    for i, reward in enumerate(task.rewards):
        if reward.url is not None:
            check_reward_url(reward.url, settings.reward_urls, ("task", "rewards", i, "url"))
        if reward.function is not None:
            check_reward_function(reward.function, settings.reward_root, ("task", "rewards", i, "function"))
        elif reward.name == "math_verify" and not math_verify_available():
            raise SpecError(
                ("task", "rewards", i, "name"),
                "math_verify needs the math-verify package on the controller and workers (pip install 'groupscale[math]'); "
                "allowed now: exact_match, numeric_match",
            )
    answers = answer_paths([r.model_dump() for r in task.rewards])
    sizes, warnings = {}, unweighted(task)
    for field in ("path", "eval_path"):
        path = getattr(task, field)
        if path is None:
            continue
        check_under_root(path, settings.data_root, ("task", field), "data", "GROUPSCALE_DATA_ROOT")
        try:
            rows = load_rows(path, task.split)
            check_rows(rows, task.prompt_column, answers)
        except DatasetError as e:
            loc = ("task", field) if e.field == "path" else ("task", e.field)
            raise SpecError(loc, f"{path[:200]!r}: {e}") from None
        sizes[field] = len(rows)
        warnings += leaked_answers(rows, task.prompt_column, f"task.{field}")
        check_answers(task, rows, field)
    if task.prompt_template is not None:  # a data file like the data, that must format a prompt (sweeps.prompt_template)
        loc = ("task", "prompt_template")
        template = check_under_root(task.prompt_template, settings.data_root, loc, "data", "GROUPSCALE_DATA_ROOT")
        if (why := prompt_template_error(template)) is not None:
            raise SpecError(loc, f"{task.prompt_template[:200]!r}: {why}")
    if task.eval_path is None:
        n_eval = round((task.eval_fraction or DEFAULT_EVAL_FRACTION) * sizes["path"])
        if sizes["path"] < 2 or n_eval < 1 or n_eval >= sizes["path"]:
            raise SpecError(
                ("task", "eval_fraction"),
                f"the dataset has {sizes['path']} rows, so eval_fraction {task.eval_fraction or DEFAULT_EVAL_FRACTION} leaves "
                "an empty train or held-out split; allowed: a fraction that holds out at least one row and keeps one, or "
                "eval_path",
            )
    return warnings


def unweighted(task: DatasetTaskSpec) -> list[str]:
    """A note per reward term of weight 0: accepted, as TRL takes a reward_weights entry of 0 (a term watched, not
    trained on: its reward/<key> metric is still logged), but it adds nothing to the reward and costs its scoring."""
    keys = term_names([r.model_dump() for r in task.rewards])
    return [
        f"task.rewards[{i}].weight is 0: {name} is scored and logged (metric reward/{key}) but adds nothing to the reward; "
        "remove the entry if you do not need its metric (scoring it costs time)"
        for i, (reward, (name, key)) in enumerate(zip(task.rewards, keys, strict=True))
        if reward.weight == 0
    ]


def check_answers(task: DatasetTaskSpec, rows: list[dict[str, Any]], field: str) -> None:
    """The built-ins that run here read the file's reference answers: numeric_match each sampled one as a number, and
    each scores a checked row's reference (workers.entry.check_answers_here). Raises SpecError at the reward."""
    failure = check_answers_here([r.model_dump() for r in task.rewards], rows, task.prompt_column)
    if failure is not None:
        raise SpecError(("task", "rewards", failure["index"], "name"), f"{failure['message']} (task.{field})")


def leaked_answers(rows: list[dict[str, Any]], column: str, where: str) -> list[str]:
    """A warning when conversational prompts end with an assistant turn (a chat dataset's reference answer kept in
    the prompt column): rendered with a generation prompt after it, every prompt shows the model its solution."""
    ending = [row[column][-1].get("role") for row in rows[:100] if isinstance(row.get(column), list) and row[column]]
    n = sum(role == "assistant" for role in ending)
    if not n:
        return []
    return [
        f"{where}: {n} of the first {len(ending)} prompts in column {column!r} end with an assistant turn, so each "
        "shows the model its reference answer; give prompt_column a column of the user turns alone (e.g. the "
        "messages without the last one, made in a preprocessing step)"
    ]


def check_reward_url(url: str, allowed: str | None, loc: tuple[str | int, ...]) -> None:
    """A reward server is called from the workers: only under a prefix of GROUPSCALE_REWARD_URLS (a sweep's author
    must not make the cluster's workers send requests wherever they like)."""
    prefixes = [p.strip() for p in (allowed or "").split(",") if p.strip()]
    if not prefixes:
        raise SpecError(
            loc,
            "reward servers are disabled on this server: the workers would send requests to a URL the sweep names. To "
            "enable them, start the server with GROUPSCALE_REWARD_URLS set to the URL prefixes the workers may call "
            "(comma-separated, e.g. http://rm-host:5000/); allowed now: built-in rewards and reward files",
        )
    if not any(url.startswith(p) for p in prefixes):
        raise SpecError(loc, f"{url[:200]!r} is under none of GROUPSCALE_REWARD_URLS; allowed: {', '.join(prefixes)}")


def check_reward_function(ref: str, reward_root: Path | None, loc: tuple[str | int, ...]) -> None:
    """FILE.py:NAME: user code runs only from under GROUPSCALE_REWARD_ROOT; FILE must parse and bind NAME at its
    top level (by def, class, assignment or import; unless it star-imports or defines ``__getattr__``).

    FILE is parsed (ast), not run: the controller never executes user code.
    """
    if reward_root is None:
        raise SpecError(
            loc,
            "user reward functions are disabled on this server: they run user code on the cluster. To enable them, start the "
            "server with GROUPSCALE_REWARD_ROOT set to a folder that every Ray node sees at the same path, and put FILE.py under "
            "it; allowed now: built-in rewards (name: exact_match | numeric_match | math_verify)",
        )
    file, _, name = ref.rpartition(":")
    path = check_under_root(file, reward_root, loc, "reward", "GROUPSCALE_REWARD_ROOT")
    if not _is_file(path):
        raise SpecError(loc, f"{file[:200]!r} is not a readable file on the controller")
    try:
        tree = ast.parse(path.read_bytes(), filename=path.name)
    except (SyntaxError, ValueError, OSError) as e:
        raise SpecError(
            loc, f"{path.name} does not parse as Python ({type(e).__name__} at line {getattr(e, 'lineno', '?')})"
        ) from None
    bound = _bound_names(tree.body)
    if bound is not None and name not in bound and "__getattr__" not in bound:
        functions = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        raise SpecError(
            loc, f"{path.name} binds no top-level {name!r} (by def, class, assignment or import); its functions: {functions[:20]}"
        )


def _bound_names(body: list[ast.stmt]) -> set[str] | None:
    """Names a module body binds at its top level (inside if/try/with blocks too); None when it star-imports."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):  # blocks run at import time
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            inner += [stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
            found = _bound_names(inner)
            if found is None:
                return None
            names |= found
    return names


def check_task_file(task_path: str) -> None:
    """The jsonl task's file is readable here and parses as the worker will parse it (workers.tasks.jsonl),
    so that a wrong file (``/etc/passwd``) is a 422 now, not a failed trial later. Its content is not echoed."""
    path = Path(task_path).expanduser()
    if not _is_file(path):
        raise SpecError(("task", "path"), f"{task_path[:200]!r} is not a readable file on the controller")
    try:
        read_prompt_answer_lines(path)
    except (OSError, ValueError, RecursionError) as e:  # ValueError: not prompt/answer JSON lines, or not UTF-8
        reason = str(e) if not isinstance(e, UnicodeDecodeError) else "not UTF-8 text"
        raise SpecError(
            ("task", "path"),
            f"{task_path[:200]!r} is not a usable jsonl task file: {reason[:300]}; "
            'allowed: one {"prompt": str, "answer": str or number} object a line, at least 2 lines',
        ) from None


def _is_file(path: Path) -> bool:
    """is_file() that also says False for paths the OS refuses (too long, bad bytes)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def check_model_folder(model_path: str, model_root: Path | None) -> None:
    """The folder lies under model_root (when set) and holds a config.json that transformers can load."""
    path = check_under_root(model_path, model_root, ("model", "path"), "model", "GROUPSCALE_MODEL_ROOT")
    if not _is_file(path / "config.json"):
        raise SpecError(("model", "path"), f"{model_path[:200]!r} is not a Hugging Face model folder (no config.json)")
    why = model_config_error(path)
    if why is not None:
        raise SpecError(("model", "path"), f"{model_path!r} has no loadable config.json ({why})")


def preflight_answer(spec: SweepSpec) -> AnswerPlan:
    """The plan `groupscale answer` will follow (its method's, sweeps.answer.METHODS); SpecError when it cannot run
    this spec: a budget below the smallest probe."""
    from sweeps.answer import BudgetTooSmall, get_method

    try:
        return get_method(spec.answer.method).plan(spec)
    except BudgetTooSmall as e:
        raise SpecError(("answer", "budget"), str(e)) from e
