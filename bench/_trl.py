"""The TRL GRPOConfig settings that make TRL's GRPOTrainer do groupscale's work in the TRL benchmarks.

Sampling at temperature 1 with no top-k/top-p, no KL (beta 0), one update per generation, PPO clip 0.2,
the per-sequence token mean (loss_type grpo), rewards centred but not scaled (scale_rewards none, like
groupscale's advantage mean), gradient clipping at 1, no dropout, seed 0, no data-loader workers.
"""

MATCHED = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "beta": 0.0,
    "num_iterations": 1,
    "epsilon": 0.2,
    "loss_type": "grpo",
    "scale_rewards": "none",
    "max_grad_norm": 1.0,
    "disable_dropout": True,
    "seed": 0,
    "dataloader_num_workers": 0,
}
