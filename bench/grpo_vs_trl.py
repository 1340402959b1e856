"""groupscale's GRPO trainer against TRL's GRPOTrainer on the same work, in one process.

Same tiny preset (identical starting weights, checked), task, budget B, group size G,
max_new_tokens, learning rate, loss (GRPO's per-sequence token mean, no std scaling, no KL, one
inner step) and number of steps, both on the CPU with one thread. Prints seconds per step for
each (median over the steps after a warm-up, then the median over ``--repeats`` interleaved pairs
of runs, so that a burst of load on the machine hits both) and the ratio; the last line is
``speedup_vs_trl: X`` (TRL seconds per step / groupscale seconds per step).

    pip install trl datasets   # `make bench` does it
    python bench/grpo_vs_trl.py [--steps 30] [--samples-per-step 64] [--group-size 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

from workers.engines.groupscale import TrialConfig, train_trial
from workers.models.loading import load_lm
from workers.models.presets import preset_path
from workers.tasks import make_task

TASK = {"name": "arithmetic", "max_operand": 49}
WARMUP = 3  # steps left out of the timing (first allocations, lazy imports)


def groupscale_seconds_per_step(folder: Path, cache: Path, args: argparse.Namespace) -> float:
    cfg = TrialConfig.flat(
        task=TASK,
        model={"path": str(folder)},
        group_size=args.group_size,
        samples_per_step=args.samples_per_step,
        seed=0,
        steps=args.steps,
        advantage="mean",
        lr=args.lr,
        max_new_tokens=args.max_new_tokens,
        eval_prompts=8,
        cache_dir=str(cache),
        loss_aggregation="seq_mean_token_mean",
        num_threads=1,
    )
    stamps: list[float] = []
    train_trial(cfg, lambda m, s: stamps.append(time.perf_counter()) if "reward_mean" in m else None)
    return float(np.median(np.diff(stamps)[WARMUP:]))


def trl_seconds_per_step(folder: Path, out: Path, args: argparse.Namespace) -> float:
    from _trl import MATCHED  # bench/_trl.py: the settings that match groupscale's work
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    task = make_task(TASK)
    rng = np.random.default_rng(0)
    problems = task.sample_train(args.samples_per_step * args.steps, rng)
    data = Dataset.from_list([{"prompt": p.prompt, "answer": p.answer} for p in problems])

    def exact_match(completions: list[str], answer: list[str], **_: object) -> list[float]:
        return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]

    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, *a, **k):
            stamps.append(time.perf_counter())

    policy = load_lm(folder)
    # groupscale's trainer starts from load_lm(folder) too: the model TRL gets must equal it.
    assert same_weights(policy.module, load_lm(folder).module), "TRL and groupscale must start from the same weights"
    config = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=10_000,
        max_steps=args.steps,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        per_device_train_batch_size=args.samples_per_step,
        num_generations=args.group_size,
        steps_per_generation=1,
        max_completion_length=args.max_new_tokens,
        **MATCHED,
    )
    trainer = GRPOTrainer(
        model=policy.module,
        reward_funcs=exact_match,
        args=config,
        train_dataset=data,
        processing_class=policy.tokenizer,
        callbacks=[Clock()],
    )
    trainer.train()
    return float(np.median(np.diff(stamps)[WARMUP:]))


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--samples-per-step", type=int, default=64)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "models"
        folder = preset_path("tiny-llama", make_task(TASK), cache)
        # One short unmeasured run of each first: lazy imports and first allocations hit neither timing.
        warm = argparse.Namespace(**{**vars(args), "steps": WARMUP + 2})
        groupscale_seconds_per_step(folder, cache, warm), trl_seconds_per_step(folder, Path(tmp) / "trl-warm", warm)
        pairs = [
            (groupscale_seconds_per_step(folder, cache, args), trl_seconds_per_step(folder, Path(tmp) / f"trl{r}", args))
            for r in range(args.repeats)
        ]
    ours, theirs = (float(np.median(x)) for x in zip(*pairs))
    print(f"versions: torch {torch.__version__}, transformers {version('transformers')}, trl {version('trl')}")
    print(
        f"work: tiny-llama ({folder.name}), B={args.samples_per_step}, G={args.group_size}, "
        f"max_new_tokens={args.max_new_tokens}, {args.steps} steps, 1 CPU thread, both from the same weights"
    )
    for i, (a, b) in enumerate(pairs):
        print(f"pair {i}: groupscale {a * 1000:.1f} ms/step, TRL {b * 1000:.1f} ms/step, ratio {b / a:.2f}")
    print(f"groupscale: {ours * 1000:.1f} ms/step;  TRL GRPOTrainer: {theirs * 1000:.1f} ms/step (medians)")
    print(f"speedup_vs_trl: {theirs / ours:.2f}")


if __name__ == "__main__":
    main()
