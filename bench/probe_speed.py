"""The probe's score vectors (workers.scores) against one backward pass per completion, on tiny-llama.

The probe's cost is its score vectors. On the arithmetic preset (tiny-llama, ~100k parameters, sketched to 512
dimensions), 32 prompts x 16 completions are scored three ways on the same rollout: one backward pass per
completion (count-sketched), 64 completions a pass with each completion's gradient formed and count-sketched (the
path before 2026-12), and 64 a pass sketched inside the backward pass (TensorSketch, the probe's path, checked
against the TensorSketch of the formed scores). Prints seconds of each and ``probe_speedup`` (loop / the probe's
path) last. Goal: probe_speedup >= 5.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from sweeps.spec import SweepSpec
from sweeps.trial import TrialConfig
from workers.batch import setup
from workers.probe import score_vectors
from workers.sketch import CountSketch, TensorSketch

PROMPTS, COMPLETIONS = 32, 16  # 512 completions: the loop takes long enough to time
CHUNK = 64  # completions per backward pass (score_vectors default)


def main() -> None:
    torch.set_num_threads(1)
    spec = SweepSpec.model_validate(
        {
            "name": "probe-speed",
            "task": {"name": "arithmetic"},
            "model": {"preset": "tiny-llama"},
            "group_sizes": [2],
            "samples_per_step": [2],
        }
    )
    with tempfile.TemporaryDirectory() as cache:
        cfg = TrialConfig.for_trial(spec, 2, 2, 0, Path(cache))
        task, policy, rng = setup(cfg)
        policy.module.eval()
        problems = task.sample_train(PROMPTS, rng)
        ro = policy.sample(
            [p.prompt for p in problems for _ in range(COMPLETIONS)],
            max_new_tokens=cfg.grpo.max_new_tokens,
            temperature=cfg.grpo.temperature,
        )
        params = [p for p in policy.module.parameters() if p.requires_grad]
        sketch = CountSketch(sum(p.numel() for p in params), 512, 0)
        tensor = TensorSketch(params, 512, 0)
        score_vectors(policy, ro.rows(slice(0, 8)), cfg.grpo.temperature, tensor, params)  # warm-up
        t0 = time.perf_counter()
        loop = score_vectors(policy, ro, cfg.grpo.temperature, sketch, params, batched=False)
        t1 = time.perf_counter()
        batched = score_vectors(policy, ro, cfg.grpo.temperature, sketch, params, batched=True, chunk=CHUNK)
        t2 = time.perf_counter()
        sketched = score_vectors(policy, ro, cfg.grpo.temperature, tensor, params, chunk=CHUNK)
        t3 = time.perf_counter()
        formed = tensor(torch.as_tensor(score_vectors(policy, ro, cfg.grpo.temperature, None, params, chunk=CHUNK))).numpy()
    print(f"completions: {ro.input_ids.shape[0]}, parameters: {sum(p.numel() for p in params)}, sketch: 512, 1 thread")
    print(f"loop (one backward per completion, count sketch): {t1 - t0:.2f} s")
    before = f"{np.abs(loop - batched).max():.2e} (largest |score| {np.abs(loop).max():.3g})"
    print(f"batched, each completion's gradient formed (the path before): {t2 - t1:.2f} s; max |diff.| from the loop {before}")
    after = f"{np.abs(sketched - formed).max():.2e} (largest {np.abs(formed).max():.3g})"
    print(f"sketched in the backward pass (the probe's path): {t3 - t2:.2f} s; max |diff.| from the formed scores' {after}")
    print(f"probe_speedup_before: {(t1 - t0) / (t2 - t1):.2f}")
    print(f"probe_speedup: {(t1 - t0) / (t3 - t2):.2f}")


if __name__ == "__main__":
    main()
