"""Runs `groupscale answer`: the method the spec names (sweeps.answer.METHODS) on the real worker code.

Every registered method runs the same stages (workers.answers.stages) with its own plan and reading; a method
whose training side differs would register its runner in ``RUNNERS``.
"""

from __future__ import annotations

from pathlib import Path

from sweeps.answer import Answer, AnswerMethod, get_method
from sweeps.spec import SweepSpec
from workers.answers.stages import run_stages
from workers.progress import Report

RUNNERS = dict.fromkeys(("staged", "tracking"), run_stages)


def run_answer(spec: SweepSpec, cache_dir: str | Path, budget: int | None = None, report: Report | None = None) -> Answer:
    """The answer of ``spec.answer.method`` for ``spec`` within ``budget`` completions (its plan's default when None);
    ``report`` hears each stage as it runs (workers.progress). Raises what run_stages raises, and ValueError for an
    unknown method (listing the names)."""
    method = get_method(spec.answer.method)
    return RUNNERS[method.name](method, spec, cache_dir, budget, report)
