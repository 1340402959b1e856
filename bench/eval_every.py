"""What the default held-out evals on the way (``eval.every: auto``) cost a trial: the same trial with and without them.

For the demo sweep (arithmetic-tiny: exact expected reward by teacher forcing, 512 eval prompts) and the bring-your-own
example (a chat model, a user reward, 60 eval prompts x 4 sampled completions), one trial at G = 4 is trained twice,
one after the other on one thread: with ``eval.every: 0`` (evals before step 1 and at T only) and with the default
``auto`` (also at about T/4, T/2 and 3T/4). Prints each trial's seconds, its final gap (the same in both: the evals
fork the RNG, so training does not change) and

    eval_every_cost = seconds with auto / seconds without

    GROUPSCALE_REWARD_ROOT=sweeps/examples/byo python bench/eval_every.py
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sweeps.spec.loading import load_spec  # noqa: E402
from sweeps.trial import TrialConfig  # noqa: E402
from workers.engines.groupscale import train_trial  # noqa: E402

EXAMPLES = ("sweeps/examples/arithmetic-tiny.yaml", "sweeps/examples/byo/spec.yaml")
GROUP_SIZE = 4


def timed(cfg: TrialConfig) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    result = train_trial(cfg)
    assert result.status == "succeeded", result.reason
    return time.perf_counter() - started, result.metrics


def main() -> None:
    torch.set_num_threads(1)
    os.environ.setdefault("GROUPSCALE_REWARD_ROOT", str(ROOT / "sweeps/examples/byo"))
    with tempfile.TemporaryDirectory() as cache:
        for path in EXAMPLES:
            spec = load_spec(ROOT / path)
            cfg = TrialConfig.for_trial(spec, GROUP_SIZE, spec.samples_per_step[0], 0, Path(cache))
            train_trial(dataclasses.replace(cfg, steps=1))  # builds the preset once, outside the timings
            off, off_metrics = timed(dataclasses.replace(cfg, eval=cfg.eval.model_copy(update={"every": 0})))
            auto, auto_metrics = timed(cfg)
            evals = [s for s in cfg.eval.checkpoints(cfg.steps) if s < cfg.steps]
            print(f"{spec.name}: T = {cfg.steps}, evals on the way at {evals}")
            print(f"  without: {off:.1f} s, gap {off_metrics['gap']:.4f}")
            print(
                f"  auto:    {auto:.1f} s, gap {auto_metrics['gap']:.4f}, "
                + ", ".join(f"gap@{s} {auto_metrics[f'gap@{s}']:.4f}" for s in evals)
            )
            print(f"  eval_every_cost = {auto / off:.3f}")


if __name__ == "__main__":
    main()
