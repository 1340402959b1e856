"""The two engines on the same small sweep, and the TRL engine's wrapper against a plain GRPOTrainer run.

One task (arithmetic on the tiny-llama preset), G in {2, 4, 8, 16, 32} at B = 64, two seeds, T steps, on the CPU
with one thread, in this process: groupscale's trainer (engine groupscale) and TRL's GRPOTrainer (engine trl, the
same loss settings: dapo token mean, no std scaling, no KL, one step per generation). Prints the seconds per step
of each (median over steps after a warm-up), the ratio ``seconds_per_step_trl_over_groupscale``, each engine's
fitted G* with its 95% interval (a boundary fit: the side of the grid it lies beyond) and whether the two overlap;
then ``trl_wrapper_overhead``: the wall time of one engine-trl trial (its held-out evals left out: they are
measurement, the same for both engines) over a plain run (load the model and data, build a GRPOTrainer with the
same GRPOConfig, data and reward, train) in the same process (goal <= 1.1).

    python bench/engines.py [--steps 30]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

from sweeps.fit import fit_law
from sweeps.trial import TrialConfig
from workers.engines.trl import trl_arguments
from workers.measures import trainer
from workers.models.presets import preset_path
from workers.tasks import make_task

TASK = {"name": "arithmetic", "max_operand": 49}
GROUPS, BUDGET, SEEDS = (2, 4, 8, 16, 32), 64, (0, 1)
WARMUP = 3
RECIPE = {"learning_rate": 2e-4, "lr_scheduler_type": "constant", "loss_type": "dapo", "scale_rewards": "none", "beta": 0.0}
RECIPES = {"groupscale": {}, "trl": RECIPE}  # engine -> its trl: section (groupscale's settings are the config's own)
STEP_MARKER = {"groupscale": "reward_mean", "trl": "loss"}  # a metric each engine reports once per optimizer step


def config(engine: str, g: int, seed: int, steps: int, cache: Path) -> TrialConfig:
    return TrialConfig.flat(
        task=TASK,
        model={"preset": "tiny-llama"},
        group_size=g,
        samples_per_step=BUDGET,
        seed=seed,
        steps=steps,
        lr=2e-4,
        advantage="mean",
        loss_aggregation="token_mean",
        eval_prompts=128,
        cache_dir=str(cache),
        engine=engine,
        trl=RECIPES[engine],
    )


def run(engine: str, g: int, seed: int, steps: int, cache: Path) -> tuple[float, float]:
    """(median seconds per step, final gap) of one trial."""
    stamps: list[float] = []
    marker = STEP_MARKER[engine]

    def clock(metrics: dict, step: int) -> None:
        if marker in metrics:
            stamps.append(time.perf_counter())

    result = trainer(engine)(config(engine, g, seed, steps, cache), clock)
    assert result.status == "succeeded", result
    return float(np.median(np.diff(stamps)[WARMUP:])), result.metrics["gap"]


def plain_trl_seconds(steps: int, cache: Path) -> float:
    """A plain GRPOTrainer.train() with the engine's own GRPOConfig, data and reward, no groupscale around it."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from workers.models.loading import load_policy

    cfg = config("trl", 4, 0, steps, cache)

    def exact_match(completions: list[str], answer: list[str], **_: object) -> list[float]:
        return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]

    start = time.perf_counter()  # what a plain run does: load the model and the data, build the trainer, train
    task = make_task(TASK)
    data = Dataset.from_list([{"prompt": p.prompt, "answer": p.answer} for p in task.train_support()[0]])
    torch.manual_seed(cfg.seed)
    policy = load_policy(cfg.model, task, cache)
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(**{**trl_arguments(cfg), "output_dir": out})
        trainer = GRPOTrainer(
            model=policy.module, reward_funcs=exact_match, args=args, train_dataset=data, processing_class=policy.tokenizer
        )
        trainer.train()
        return time.perf_counter() - start


def engine_trl_seconds(steps: int, cache: Path) -> float:
    """One engine-trl trial's wall time, its held-out evals (before and after training) left out."""
    import workers.engines.trl as engine

    spent = []
    evaluate = engine.evaluate

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return evaluate(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    engine.evaluate = timed
    try:
        start = time.perf_counter()
        trainer("trl")(config("trl", 4, 0, steps, cache), lambda m, s: None)
        return time.perf_counter() - start - sum(spent)
    finally:
        engine.evaluate = evaluate


def interval(rows: list[tuple[int, int, float]]) -> tuple[str, float | None, list[float] | None]:
    """(fit status, G*, the G* range the fit allows): its 95% interval, or for a boundary fit the side of the grid's
    edge it lies beyond ([1, G_min] or [G_max, inf])."""
    fit = fit_law([g for g, _, _ in rows], [BUDGET] * len(rows), [s for _, s, _ in rows], [y for _, _, y in rows])
    allowed = fit.g_star_ci95
    if fit.status == "boundary" and fit.g_star_bound:
        edge = float(fit.g_star_bound["group_size"])
        allowed = [1.0, edge] if fit.g_star_bound["side"] == "below" else [edge, float("inf")]
    return fit.status, fit.g_star, allowed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        preset_path("tiny-llama", make_task(TASK), cache)
        per_step: dict[str, list[float]] = {"groupscale": [], "trl": []}
        rows: dict[str, list[tuple[int, int, float]]] = {"groupscale": [], "trl": []}
        for g in GROUPS:
            for seed in SEEDS:
                for engine in ("groupscale", "trl"):  # interleaved: a burst of load hits both
                    seconds, gap = run(engine, g, seed, args.steps, cache)
                    per_step[engine].append(seconds)
                    rows[engine].append((g, seed, gap))
        plain, wrapped = [], []
        for _ in range(3):  # interleaved pairs
            plain.append(plain_trl_seconds(args.steps, cache))
            wrapped.append(engine_trl_seconds(args.steps, cache))
    print(f"versions: torch {torch.__version__}, transformers {version('transformers')}, trl {version('trl')}")
    print(f"work: arithmetic on tiny-llama, G in {GROUPS}, B = {BUDGET}, seeds {SEEDS}, {args.steps} steps, 1 CPU thread")
    ours, theirs = float(np.median(per_step["groupscale"])), float(np.median(per_step["trl"]))
    print(f"seconds per step: groupscale {ours * 1000:.1f} ms, trl {theirs * 1000:.1f} ms (medians over trials)")
    fits = {engine: interval(r) for engine, r in rows.items()}
    for engine, (status, g_star, ci) in fits.items():
        print(f"{engine}: gaps {[round(y, 4) for _, _, y in rows[engine]]}; fit {status}, G* {g_star}, range {ci}")
    a, b = fits["groupscale"][2], fits["trl"][2]
    overlap = a is not None and b is not None and max(a[0], b[0]) <= min(a[1], b[1])
    print(f"g_star_intervals_overlap: {overlap}")
    print(f"plain GRPOTrainer run: {min(plain):.2f} s; engine-trl trial without its evals: {min(wrapped):.2f} s (best of 3)")
    print(f"trl_wrapper_overhead: {min(wrapped) / min(plain):.2f}")
    print(f"seconds_per_step_trl_over_groupscale: {theirs / ours:.2f}")


if __name__ == "__main__":
    main()
