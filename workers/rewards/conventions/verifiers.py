"""The verifiers convention: an environment's rubric (prime-rl trains on verifiers environments), or one rubric function.

- ``FILE.py:load_environment`` (the name an environment module exports): called once as ``load_environment(**kwargs)``;
  the reward of a completion is the weighted sum of its rubric's functions (``rubric.funcs`` and ``rubric.weights``,
  a RubricGroup's rubrics' together), each called with the objects verifiers gives them (``prompt, completion,
  answer, state, info, task``, the rubric's ``parser`` and class objects), the ones it takes; each function's mean is
  logged, weight-0 ones (verifiers' metrics) too.
- a rubric function lifted out, ``f(parser, completion, answer, **kwargs)``: called the same way, with verifiers'
  default ``Parser()`` where it names ``parser``, and the entry's ``kwargs`` as further objects.

answer: the ``answer_column`` (default ``answer``); info and task: the row's columns of those names. The classic
(``verifiers.legacy``) API, verifiers 0.1.8 to 0.3.x (``pip install 'groupscale[verifiers]'``). Unlike verifiers,
which scores 0 when a function raises, a raising function fails the trial: nothing trains on a default.

Source: verifiers 0.3.1, ``Rubric.score_rollout`` and ``_call_individual_reward_func``
(verifiers/legacy/rubrics/rubric.py); environments/gsm8k/gsm8k.py at PrimeIntellect-ai/verifiers@0aeaee3^.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from workers.rewards.conventions import Convention, accepted, register_convention, settled, signature_of, takes
from workers.rewards.terms import RewardError, column_values

ANSWER = "answer"
LOADER = "load_environment"
# verifiers' group reward functions take these (Rubric._is_group_func); groupscale calls rubric functions one by one
GROUP_ARGUMENTS = frozenset({"states", "prompts", "completions", "answers", "tasks", "infos"})


def fits(sig: inspect.Signature, fn: Callable[..., Any]) -> bool:
    return getattr(fn, "__name__", "") == LOADER or (takes(sig, "parser", "completion") and not takes(sig, "completions"))


def default_parser() -> Any:
    """verifiers' ``Parser()``. Raises RewardError when verifiers is not installed."""
    try:
        import verifiers
    except ImportError as e:
        raise RewardError("the verifiers convention needs the verifiers package (pip install 'groupscale[verifiers]')") from e
    parser = getattr(verifiers, "Parser", None)
    if parser is None:
        raise RewardError(
            f"verifiers {getattr(verifiers, '__version__', '?')} has no classic Parser (0.4 keeps only verifiers.v1): "
            "pip install 'verifiers>=0.1.8,<0.4'"
        )
    return parser()


def rubric_functions(env: Any, name: str) -> list[tuple[Callable[..., Any], float, dict[str, Any]]]:
    """(function, weight, objects) of each function of an environment's rubric (a RubricGroup's rubrics flattened).

    Raises:
        RewardError: no rubric, no functions, or a group reward function.
    """
    rubric = getattr(env, "rubric", None)
    if rubric is None:
        raise RewardError(f"{name} returned a {type(env).__name__} without a rubric: not a verifiers environment")
    found = []
    for part in getattr(rubric, "rubrics", None) or [rubric]:
        funcs = list(getattr(part, "funcs", None) or getattr(part, "reward_funcs", None) or [])
        weights = list(getattr(part, "weights", None) or getattr(part, "reward_weights", None) or [1.0] * len(funcs))
        objects = {**(getattr(part, "class_objects", None) or {})}
        objects.setdefault("parser", getattr(part, "parser", None) or getattr(env, "parser", None))
        for fn, weight in zip(funcs, weights):
            sig = signature_of(fn)
            if sig is not None and GROUP_ARGUMENTS & set(sig.parameters):
                raise RewardError(
                    f"{name}'s rubric function {getattr(fn, '__name__', fn)} scores a group at once ({sig}); groupscale "
                    "calls rubric functions one completion at a time"
                )
            found.append((fn, float(weight), objects))
    if not found:
        raise RewardError(f"{name}'s rubric has no reward functions")
    return found


def rollout_state(prompt: Any, completion: Any, answer: Any, info: Any, task: Any) -> dict[str, Any]:
    """The state of a finished single-turn rollout, as verifiers' environments leave it for the rubric: its input
    fields, a trajectory of one step (rubric metrics such as MultiTurnMonitorRubric's ``num_turns`` read it), completed
    and not truncated, not scored yet.

    Source: verifiers 0.3.1, ``Environment.init_state`` (verifiers/legacy/envs/environment.py) and
    ``MultiTurnEnv.add_trajectory_step`` (verifiers/legacy/envs/multiturn_env.py)."""
    step = {"prompt": prompt, "completion": completion, "response": None, "tokens": None, "reward": None,
            "advantage": None, "is_truncated": False, "extras": {}}  # fmt: skip
    return {
        "prompt": prompt, "completion": completion, "answer": answer, "info": info if info is not None else {},
        "task": task, "trajectory": [step], "is_completed": True, "is_truncated": False, "reward": None,
        "metrics": None, "error": None,
    }  # fmt: skip


def wrap(fn: Callable[..., Any], entry: dict[str, Any], name: str) -> Callable[..., Any]:
    extra = dict(entry.get("kwargs") or {})
    if getattr(fn, "__name__", "") == LOADER:
        try:
            env = fn(**extra)
        except Exception as e:  # noqa: BLE001 - user code
            raise RewardError(f"{name}(**kwargs) raised {type(e).__name__}: {str(e)[:300]}") from e
        functions = rubric_functions(env, name)
    else:
        sig = signature_of(fn)
        parser = {"parser": default_parser()} if sig is None or "parser" in sig.parameters else {}
        functions = [(fn, 1.0, {**parser, **extra})]
    column = entry.get("answer_column") or ANSWER
    signatures = [signature_of(f) for f, _, _ in functions]  # once, not at every batch

    def reward(completions: list[Any], prompts: list[Any], log_metric: Callable[[str, float], None], **columns: Any) -> Any:
        n = len(completions)
        answers = column_values(columns, column, n)
        infos, tasks = columns.get("info") or [{}] * n, columns.get("task") or [None] * n
        calls = []
        for (f, _, objects), sig in zip(functions, signatures):
            for i in range(n):
                state = rollout_state(prompts[i], completions[i], answers[i], infos[i], tasks[i])
                given = {**state, "state": state, **objects}
                calls.append(f(**(given if sig is None else accepted(sig, given))))
        return settled(calls, lambda done: total(done, n, log_metric))

    def total(values: list[Any], n: int, log_metric: Callable[[str, float], None]) -> list[float]:
        sums = [0.0] * n
        for j, (f, weight, _) in enumerate(functions):
            mine = [float(v) for v in values[j * n : (j + 1) * n]]
            log_metric(getattr(f, "__name__", f"rubric_{j}"), sum(mine) / n)
            sums = [s + weight * v for s, v in zip(sums, mine)]
        return sums

    reward.__name__ = getattr(fn, "__name__", "rubric")
    return reward


VERIFIERS = register_convention(
    Convention(
        "verifiers",
        "load_environment(**kwargs) -> an environment with a rubric; or f(parser, completion, answer, **kwargs)",
        ANSWER,
        fits,
        wrap,
    )
)
