"""groupscale against TRL's GRPOTrainer at a medium shape: seconds per step and peak memory, in one run.

A Llama-architecture model of about 11M parameters with a 32k vocabulary (random weights, so completions
run to the 64-token cap: the work is the full shape), B = 64, G = 8, 64-token completions, micro-batches of
16 completions on both sides (groupscale ``micro_batch_size``; TRL per-device batch 16 x 4 accumulation
steps, one generation of 64 per optimizer step), identical starting weights, one CPU thread. Each side runs
in a process of its own so that its peak resident memory (ru_maxrss) is its own.

Both children run with glibc's mmap threshold fixed at 64 KiB (``MALLOC_MMAP_THRESHOLD_``), so that a
freed tensor's pages go back to the system and the peak RSS follows live memory, as a GPU's
``max_memory_allocated`` would, instead of heap fragmentation. The training memory of each is its peak
RSS minus its RSS once its libraries are imported (torch and transformers, and for TRL also accelerate
and datasets: 380-500 MiB before any tensor exists, which a larger model does not multiply): weights,
optimizer state, activations and logits.

Prints seconds per step of each, groupscale's split into generate / score / update, the peak RSS and
training memory of each, ``training_memory_ratio``, then ``memory_ratio_vs_trl_medium`` (peak RSS,
groupscale / TRL; goal <= 0.5) and ``speedup_vs_trl_medium`` last (TRL / groupscale seconds per step;
goal >= 1.3).

    python bench/scale_vs_trl.py [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

B, G, L, MICRO, VOCAB = 64, 8, 64, 16, 32_000
TASK = {"name": "arithmetic", "max_operand": 49}
WARMUP = 1


def build(folder: Path) -> None:
    """The medium model: the arithmetic characters plus filler tokens up to a 32k vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from workers.models.presets import build_char_tokenizer

    tok = build_char_tokenizer("0123456789+=" + "".join(chr(0x4E00 + i) for i in range(VOCAB - 16)))
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)


def run_groupscale(folder: Path, steps: int) -> dict:
    from workers.engines.groupscale import TrialConfig, train_trial

    cfg = TrialConfig.flat(
        task=TASK,
        model={"path": str(folder)},
        group_size=G,
        samples_per_step=B,
        seed=0,
        steps=steps,
        advantage="mean",
        lr=1e-5,
        max_new_tokens=L,
        eval_prompts=8,
        loss_aggregation="seq_mean_token_mean",
        micro_batch_size=MICRO,
        num_threads=1,
        cache_dir=str(folder.parent / "cache"),
    )
    rows: list[dict] = []
    train_trial(cfg, lambda m, s: rows.append({**m, "t": time.perf_counter()}) if "reward_mean" in m else None)
    keep = rows[WARMUP:]
    split = {k: float(np.median([r[k] for r in keep])) for k in ("time_generate_s", "time_score_s", "time_update_s")}
    return {
        "s_per_step": float(np.median(np.diff([r["t"] for r in rows])[WARMUP - 1 :])),
        **split,
        "tokens": float(np.median([r["completion_tokens_mean"] for r in keep])),
    }


def run_trl(folder: Path, steps: int) -> dict:
    from _trl import MATCHED  # bench/_trl.py: the settings that match groupscale's work
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from workers.models.loading import load_lm
    from workers.tasks import make_task

    problems = make_task(TASK).sample_train(B * steps, np.random.default_rng(0))
    data = Dataset.from_list([{"prompt": p.prompt, "answer": p.answer} for p in problems])
    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, *a, **k):
            stamps.append(time.perf_counter())

    policy = load_lm(folder)
    config = GRPOConfig(
        output_dir=str(folder.parent / "trl"),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=10_000,
        max_steps=steps,
        learning_rate=1e-5,
        lr_scheduler_type="constant",
        warmup_steps=0,
        per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=B // MICRO,
        num_generations=G,
        max_completion_length=L,
        **MATCHED,
    )
    trainer = GRPOTrainer(
        model=policy.module,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=config,
        train_dataset=data,
        processing_class=policy.tokenizer,
        callbacks=[Clock()],
    )
    trainer.train()
    return {"s_per_step": float(np.median(np.diff(stamps)[WARMUP - 1 :]))}


def rss_mib() -> float:
    """This process's resident memory now (VmRSS), MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def child(side: str, folder: Path, steps: int) -> None:
    torch.set_num_threads(1)
    if side == "groupscale":
        import workers.engines.groupscale  # noqa: F401  (the libraries, before the baseline)
    else:
        import trl  # noqa: F401
        from trl import GRPOTrainer  # noqa: F401
    baseline = rss_mib()
    out = run_groupscale(folder, steps) if side == "groupscale" else run_trl(folder, steps)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["train_mib"] = out["peak_rss_mib"] - baseline
    print("RESULT " + json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--side", choices=["groupscale", "trl"])
    ap.add_argument("--folder", type=Path)
    args = ap.parse_args()
    if args.side:
        return child(args.side, args.folder, args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "medium"
        build(folder)
        res = {}
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
        for side in ("groupscale", "trl"):
            p = subprocess.run(
                [sys.executable, __file__, "--side", side, "--folder", str(folder), "--steps", str(args.steps)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            res[side] = json.loads(next(line for line in p.stdout.splitlines() if line.startswith("RESULT "))[7:])
    gs, trl = res["groupscale"], res["trl"]
    print(
        f"work: Llama, about 11M parameters, vocabulary {VOCAB}, B={B}, G={G}, {L}-token completions, "
        f"micro-batches of {MICRO}, {args.steps} steps (first {WARMUP} not timed), 1 CPU thread, the same starting weights"
    )
    print(
        f"groupscale: {gs['s_per_step']:.2f} s/step (generate {gs['time_generate_s']:.2f} s, "
        f"score {gs['time_score_s']:.3f} s, update {gs['time_update_s']:.2f} s; {gs['tokens']:.0f} tokens per completion), "
        f"peak RSS {gs['peak_rss_mib']:.0f} MiB, training memory {gs['train_mib']:.0f} MiB"
    )
    print(
        f"TRL GRPOTrainer: {trl['s_per_step']:.2f} s/step, peak RSS {trl['peak_rss_mib']:.0f} MiB, "
        f"training memory {trl['train_mib']:.0f} MiB"
    )
    print(f"training_memory_ratio: {gs['train_mib'] / trl['train_mib']:.2f}")
    print(f"memory_ratio_vs_trl_medium: {gs['peak_rss_mib'] / trl['peak_rss_mib']:.2f}")
    print(f"speedup_vs_trl_medium: {trl['s_per_step'] / gs['s_per_step']:.2f}")


if __name__ == "__main__":
    main()
