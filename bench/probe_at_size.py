"""The probe at a real model's size: its cost against one training step of the same model, on CPU.

A randomly initialised Qwen2-shaped model (transformers' Qwen2Config with Qwen2.5-0.5B's shape by default: 24 layers,
hidden 896, 14 heads, 2 KV heads, MLP 4864, 151,936-token vocabulary, tied embeddings; 494M parameters; ``--shape
1.5b``: Qwen2.5-1.5B's, in bfloat16 so that AdamW fits; built from the config, no weights downloaded) samples S
completions of L tokens for random prompts, then, on the same completions,

- the probe's work, sketched to D = 512 inside the backward pass (workers.scores.sketched_scores with
  workers.sketch.TensorSketch, the probe's path: ``new``);
- a training step: groupscale's GRPO update (workers.engines.groupscale.grpo_update, AdamW);
- the path before it (``old``, ``--path both``): every completion's gradient of each weight formed, then
  count-sketched (workers.scores.batched_scores with workers.sketch.CountSketch);

are timed; the probe's samples are generated as a step's are, so per completion

    probe / step = (generate + scores) / (generate + update).

It prints seconds and the peak resident memory of each phase (RSS polled every 5 ms, freed memory handed back to
the system between phases), then the ratios: ``scores_over_update`` (the backward work alone),
``probe_memory_over_update`` and ``probe_cost_per_completion`` last (the Done-when figure of issue 56: goal <= 1.0).
The probe's default K x M = 256 x 16 = 4096 completions then cost that ratio x 4096 / B training steps of budget B.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import threading
import time
from contextlib import contextmanager

import torch

PROMPT_TOKENS = 32
SHAPES = {  # Qwen2.5's published shapes: (layers, hidden, heads, KV heads, MLP); vocabulary 151,936, tied embeddings
    "0.5b": (24, 896, 14, 2, 4864),
    "1.5b": (28, 1536, 12, 2, 8960),
}


def qwen2_shaped(shape: str = "0.5b", dtype: torch.dtype = torch.float32):
    """A Qwen2.5-shaped causal LM (``shape`` in SHAPES) with random weights, from its config alone."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    layers, hidden, heads, kv_heads, mlp = SHAPES[shape]
    config = Qwen2Config(
        vocab_size=151_936,
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).to(dtype).eval()


def rss_gib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**30


@contextmanager
def phase(name: str, seconds: dict, peaks: dict):
    """Times the block and polls its peak RSS; freed memory goes back to the system first (glibc malloc_trim), so
    that a phase's peak is its own and not an earlier phase's leftover."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    peak, done = [rss_gib()], threading.Event()

    def poll() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], rss_gib())

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] = time.perf_counter() - t0
        done.set()
        watcher.join()
        peaks[name] = max(peak[0], rss_gib())


def main() -> None:
    from sweeps.trial import TrialConfig
    from workers.batch import Batch
    from workers.engines.groupscale import grpo_update, make_optimizer
    from workers.probe import score_vectors
    from workers.rollout import Rollout, completion_logprobs, completion_logprobs_entropy
    from workers.scores import select_parameters
    from workers.sketch import CountSketch, TensorSketch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    parser.add_argument("--completions", type=int, default=8, help="S: completions sampled, trained on and scored")
    parser.add_argument("--tokens", type=int, default=32, help="L: tokens a completion")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parameters", default="all", help="probe.parameters: all, lm_head, last_layers:K")
    parser.add_argument("--path", choices=["new", "both"], default="both", help="both: also the path before (slow)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    s, length = args.completions, args.tokens
    dtype = torch.bfloat16 if args.shape == "1.5b" else torch.float32
    seconds: dict[str, float] = {}
    peaks: dict[str, float] = {}

    model = qwen2_shaped(args.shape, dtype)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: Qwen2-{args.shape}-shaped, {n_params / 1e6:.0f}M parameters ({dtype}), S = {s}, L = {length}, "
          f"{args.threads} threads; memory after building it: {rss_gib():.1f} GiB")  # fmt: skip

    class Shaped:  # the policy interface grpo_update and score_vectors use
        module = model

        def logprobs(self, rollout: Rollout, temperature: float) -> torch.Tensor:
            return completion_logprobs(model, rollout, temperature)

        def logprobs_entropy(self, rollout: Rollout, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
            return completion_logprobs_entropy(model, rollout, temperature)

    prompts = torch.randint(3, 151_936, (s // 4, PROMPT_TOKENS)).repeat_interleave(4, dim=0)  # groups of 4
    with phase("generate", seconds, peaks), torch.no_grad():
        ids = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=length,
                             min_new_tokens=length, do_sample=True, pad_token_id=0)  # fmt: skip
    rollout = Rollout(
        ids, torch.ones_like(ids), torch.ones(s, length), PROMPT_TOKENS, [""] * s, torch.ones(s, dtype=torch.bool), 4
    )
    print(f"generate: {seconds['generate']:.1f} s ({s} completions of {length} tokens)")

    params = select_parameters(model, args.parameters)
    n_scored = sum(p.numel() for p in params)
    with phase("new", seconds, peaks):
        new = score_vectors(Shaped(), rollout, 1.0, TensorSketch(params, 512, 0), params, batched=True, chunk=4)
    assert new.shape == (s, 512) and torch.isfinite(torch.as_tensor(new)).all()
    print(f"scores of {n_scored / 1e6:.0f}M parameters ({args.parameters}) sketched to 512 in the backward pass "
          f"(TensorSketch, chunks of 4): {seconds['new']:.1f} s; peak memory {peaks['new']:.1f} GiB")  # fmt: skip

    cfg = TrialConfig.flat(task={"name": "arithmetic"}, model={"preset": "tiny-llama"}, group_size=4, samples_per_step=s,
                           seed=0, steps=1, micro_batch_size=4, max_new_tokens=length)  # fmt: skip
    batch = Batch([None] * (s // 4), rollout, torch.zeros(s // 4, 4), torch.randn(s))
    model.train()
    with phase("update", seconds, peaks):
        opt = make_optimizer("adamw", model.parameters(), 1e-6)
        grpo_update(Shaped(), None, opt, batch, cfg)
    print(f"update (AdamW, micro-batches of 4): {seconds['update']:.1f} s; peak memory {peaks['update']:.1f} GiB")
    del opt
    model.zero_grad(set_to_none=True)
    model.eval()

    if args.path == "both":
        with phase("old", seconds, peaks):
            old = score_vectors(Shaped(), rollout, 1.0, CountSketch(n_scored, 512, 0), params, batched=True, chunk=4)
        assert old.shape == (s, 512)
        print(f"the path before (each completion's gradient formed, then count-sketched): {seconds['old']:.1f} s; "
              f"peak memory {peaks['old']:.1f} GiB")  # fmt: skip
        old_ratio = (seconds["generate"] + seconds["old"]) / (seconds["generate"] + seconds["update"])
        print(f"probe_cost_per_completion_before: {old_ratio:.2f}; the new path is {seconds['old'] / seconds['new']:.1f}x faster")
    ratio = (seconds["generate"] + seconds["new"]) / (seconds["generate"] + seconds["update"])
    print(f"a probe of K x M = 4096 completions costs {ratio * 4096 / 512:.1f} training steps of B = 512")
    print(f"scores_over_update: {seconds['new'] / seconds['update']:.2f}")
    print(f"probe_memory_over_update: {peaks['new'] / peaks['update']:.2f} ({peaks['new']:.1f} / {peaks['update']:.1f} GiB)")
    print(f"probe_cost_per_completion: {ratio:.2f} (of a training step's)")


if __name__ == "__main__":
    main()
