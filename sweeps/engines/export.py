"""The answer of a sweep ("use G at budget B") as a file another trainer reads, in the terms of the sweep's engine:
a TRL GRPOConfig YAML (``trl_config``) or verl overrides (each engine's ``verl_overrides``)."""

from __future__ import annotations

from sweeps.engines import get_engine
from sweeps.spec import SweepSpec
from sweeps.yamlfile import dump_yaml


def trl_config(group_size: int, samples_per_step: int, spec: SweepSpec, header: str = "", num_processes: int = 1) -> str:
    """The answer as YAML that ``trl grpo --config`` reads (or ``GRPOConfig(**yaml.safe_load(text))``), with ``header``
    and the notes as comments: the settings the sweep's engine gives for G and B on ``num_processes`` processes (for an
    engine-trl sweep the user's recipe with the measured G and batch settings; else trl_settings). Raises ValueError
    when they cannot be set so."""
    settings, notes = get_engine(spec.engine).trl_config(group_size, samples_per_step, spec, num_processes)
    lines = [f"# {line}" for line in header.splitlines()] + [f"# note: {n}" for n in notes]
    return "\n".join(lines + [dump_yaml(settings).rstrip()]) + "\n"
