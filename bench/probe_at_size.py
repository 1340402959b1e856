"""The probe at a real model's size: its cost against one training step of the same model, on CPU.

A randomly initialised Qwen2-0.5B-shaped model (transformers' Qwen2Config with Qwen2.5-0.5B's shape: 24 layers,
hidden 896, 14 heads, 2 KV heads, MLP 4864, 151,936-token vocabulary, tied embeddings; 494M parameters; built from
the config, no weights downloaded) samples S completions of L tokens for random prompts, then both

- a training step on them: groupscale's GRPO update (workers.engines.groupscale.grpo_update, AdamW), and
- the probe's work on them: every completion's score vector over all parameters, count-sketched to D = 512
  (workers.probe.score_vectors, the probe's own path),

are timed; the probe's samples are generated as a step's are, so per completion

    probe / step = (generate + scores) / (generate + update).

It prints seconds of each part, the peak resident memory after each, and the ratio last (``probe_cost_per_completion``);
the probe's default K x M = 256 x 16 = 4096 completions then costs that ratio x 4096 / B training steps of budget B.
Memory: the sketch's hash (5 bytes a parameter) and one row's gradient of the largest weight at a time.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

PROMPT_TOKENS = 32


def qwen2_half_b():
    """A Qwen2.5-0.5B-shaped causal LM with random weights (float32), from its config alone."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=151_936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).eval()


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def main() -> None:
    from sweeps.trial import TrialConfig
    from workers.batch import Batch
    from workers.engines.groupscale import grpo_update, make_optimizer
    from workers.probe import CountSketch, score_vectors
    from workers.rollout import Rollout, completion_logprobs, completion_logprobs_entropy
    from workers.scores import select_parameters

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=8, help="S: completions sampled, trained on and scored")
    parser.add_argument("--tokens", type=int, default=32, help="L: tokens a completion")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parameters", default="all", help="probe.parameters: all, lm_head, last_layers:K")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    s, length = args.completions, args.tokens

    model = qwen2_half_b()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: Qwen2-0.5B-shaped, {n_params / 1e6:.0f}M parameters (float32), S = {s}, L = {length}, {args.threads} threads")
    print(f"peak memory after building it: {peak_gib():.1f} GiB")

    class Shaped:  # the policy interface grpo_update and score_vectors use
        module = model

        def logprobs(self, rollout: Rollout, temperature: float) -> torch.Tensor:
            return completion_logprobs(model, rollout, temperature)

        def logprobs_entropy(self, rollout: Rollout, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
            return completion_logprobs_entropy(model, rollout, temperature)

    prompts = torch.randint(3, 151_936, (s // 4, PROMPT_TOKENS)).repeat_interleave(4, dim=0)  # groups of 4
    t0 = time.perf_counter()
    with torch.no_grad():
        ids = model.generate(
            input_ids=prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=length,
            min_new_tokens=length,
            do_sample=True,
            pad_token_id=0,
        )
    generate_s = time.perf_counter() - t0
    rollout = Rollout(
        ids, torch.ones_like(ids), torch.ones(s, length), PROMPT_TOKENS, [""] * s, torch.ones(s, dtype=torch.bool), 4
    )
    print(f"generate: {generate_s:.1f} s ({s} completions of {length} tokens)")

    cfg = TrialConfig.flat(task={"name": "arithmetic"}, model={"preset": "tiny-llama"}, group_size=4, samples_per_step=s,
                           seed=0, steps=1, micro_batch_size=4, max_new_tokens=length)  # fmt: skip
    batch = Batch([None] * (s // 4), rollout, torch.zeros(s // 4, 4), torch.randn(s))
    opt = make_optimizer("adamw", model.parameters(), 1e-6)
    model.train()
    t0 = time.perf_counter()
    grpo_update(Shaped(), None, opt, batch, cfg)
    update_s = time.perf_counter() - t0
    print(f"update (AdamW, micro-batches of 4): {update_s:.1f} s; peak memory {peak_gib():.1f} GiB")
    del opt
    model.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    params = select_parameters(model, args.parameters)
    sketch = CountSketch(sum(p.numel() for p in params), 512, 0)
    sketch_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores = score_vectors(Shaped(), rollout, 1.0, sketch, params, batched=True, chunk=4)
    scores_s = time.perf_counter() - t0
    assert scores.shape == (s, 512) and torch.isfinite(torch.as_tensor(scores)).all()
    n_scored = sum(p.numel() for p in params)
    print(f"count sketch of {n_scored / 1e6:.0f}M parameters ({args.parameters}) to 512: built in {sketch_s:.1f} s")
    print(f"score vectors (batched, chunks of 4, sketched): {scores_s:.1f} s; peak memory {peak_gib():.1f} GiB")
    ratio = (generate_s + scores_s) / (generate_s + update_s)
    print(f"a probe of K x M = 4096 completions costs {ratio * 4096 / 512:.1f} training steps of B = 512")
    print(f"probe_cost_per_completion: {ratio:.2f} (of a training step's)")


if __name__ == "__main__":
    main()
