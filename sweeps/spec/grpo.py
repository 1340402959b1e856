"""The spec's ``grpo:`` section: the GRPO settings, with TRL's names accepted as aliases."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from sweeps.spec.base import LOSS_AGGREGATION_NAMES, MAX_COMPLETION_TOKENS, MAX_SAMPLES_PER_STEP, StrictModel

TRL_ALIASES = {
    "epsilon": "clip_eps",
    "epsilon_high": "clip_eps_high",
    "beta": "kl_beta",
    "num_iterations": "inner_steps",
    "max_completion_length": "max_new_tokens",
    "learning_rate": "lr",
    "loss_type": "loss_aggregation",
    "scale_rewards": "advantage",
}
# TRL's loss_type -> our loss_aggregation (TRL trainer/grpo_trainer.py: the normaliser of the token losses).
TRL_LOSS_TYPES = {"grpo": "seq_mean_token_mean", "dapo": "token_mean", "bnpo": "token_mean", "dr_grpo": "seq_mean_token_sum_norm"}
# TRL's scale_rewards -> our advantage (True and False are TRL's older spellings of group and none).
TRL_SCALE_REWARDS = {"group": "mean_std", True: "mean_std", "none": "mean", False: "mean"}
MAX_DYNAMIC_BATCHES = 1024  # grpo.dynamic_sampling.max_batches: generations one step may spend


class DynamicSamplingSpec(StrictModel):
    """``grpo.dynamic_sampling``: DAPO's dynamic sampling (Yu et al., arXiv 2503.14476, sec. 3.2; verl's recipe/dapo
    ``algorithm.filter_groups``): groups whose G rewards are all equal are dropped and generations of N = B / G prompts
    are sampled until N informative groups are kept or ``max_batches`` generations are spent (workers.dynamic_sampling).
    """

    max_batches: int = Field(
        ge=1,
        le=MAX_DYNAMIC_BATCHES,
        description="generations of N = B / G prompts one step may sample (verl's max_num_gen_batches; >= 1); a step that "
        "keeps fewer than N informative groups by then trains those it has, and none: no update",
    )


class GRPOSpec(StrictModel):
    """GRPO hyper-parameters. TRL's GRPOConfig names (TRL_ALIASES) are accepted with the same meaning and
    shown back under groupscale's names."""

    @model_validator(mode="before")
    @classmethod
    def _trl_names(cls, data: Any) -> Any:
        """``grpo:`` with TRL's names rewritten to groupscale's (TRL_ALIASES), values mapped where TRL's differ.

        Raises:
            ValueError: a name and its alias both given; a loss_type or scale_rewards groupscale does not run.
        """
        if not isinstance(data, dict) or not set(data) & set(TRL_ALIASES):
            return data
        out = {k: v for k, v in data.items() if k not in TRL_ALIASES}
        for trl, ours in TRL_ALIASES.items():
            if trl not in data:
                continue
            if ours in data:
                raise ValueError(f"give {trl} (TRL's name) or {ours}, not both: they are the same setting")
            value = data[trl]
            if trl == "loss_type":
                if value not in TRL_LOSS_TYPES:
                    raise ValueError(
                        f"loss_type {value!r} is not one groupscale runs; allowed: {', '.join(TRL_LOSS_TYPES)} "
                        f"(or loss_aggregation: {', '.join(LOSS_AGGREGATION_NAMES)})"
                    )
                value = TRL_LOSS_TYPES[value]
            elif trl == "scale_rewards":
                if value == "batch":
                    raise ValueError(
                        "scale_rewards 'batch' is refused: it divides by the standard deviation over the whole batch, "
                        "so a group's advantages depend on the other prompts in the step and on G, which the law of "
                        "THEORY.md does not model; allowed: group, none (or advantage: loo, mean, mean_std)"
                    )
                if not isinstance(value, (str, bool)) or value not in TRL_SCALE_REWARDS:
                    raise ValueError(f"scale_rewards {value!r} is not allowed; allowed: group, none (batch is refused)")
                value = TRL_SCALE_REWARDS[value]
            out[ours] = value
        return out

    advantage: Literal["loo", "mean", "mean_std", "oracle", "loo_std"] = Field(
        "loo",
        description="loo: leave-one-out (RLOO); mean: Dr. GRPO; mean_std: GRPO; oracle: r - V(x) (bandit); loo_std: NeMo-RL's "
        "default (leave-one-out baseline over the leave-one-out std); THEORY.md",
    )
    allocation: Literal["uniform", "per_prompt"] = Field(
        "uniform",
        description="uniform: every prompt gets G; per_prompt: each prompt the G of its pass-rate part from the probe's "
        "table at the start (THEORY.md 'Per-prompt G'), B completions a step, G for a prompt not seen yet",
    )
    optimizer: Literal["adamw", "sgd"] = "adamw"
    lr: float = Field(2e-4, gt=0, le=1000.0, description="learning rate")
    temperature: float = Field(1.0, gt=0, le=10.0, description="sampling temperature; G > 1 needs > 0")
    max_new_tokens: int = Field(4, ge=1, le=MAX_COMPLETION_TOKENS, description="completion length cap (tokens)")
    clip_eps: float = Field(0.2, gt=0, lt=1, description="PPO clip range epsilon")
    clip_eps_high: float | None = Field(None, gt=0, le=10, description="upper clip epsilon (DAPO clip-higher); default clip_eps")
    reward_scale: float = Field(1.0, gt=0, le=1e6, description="rewards are multiplied by this before advantages")
    inner_steps: int = Field(1, ge=1, le=16, description="passes over each generation's mini-batches (mu; verl's ppo_epochs)")
    steps_per_generation: int = Field(
        1,
        ge=1,
        le=1024,
        description="k: each generation of B completions is split, in sampling order, into k mini-batches of whole groups "
        "(B / k completions), one optimizer step each, against the generation's log-probs (verl's ppo_mini_batch_size = "
        "train_batch_size / k); steps T counts optimizer steps, a generation every k (engine groupscale)",
    )
    importance_sampling_level: Literal["token", "sequence"] = Field(
        "token",
        description="token: one ratio per token (PPO, GRPO); sequence: the ratio of the completion's mean token log-ratio, "
        "clipped per sequence (GSPO, arXiv 2507.18071; TRL's importance_sampling_level)",
    )
    kl_beta: float = Field(0.0, ge=0, le=100, description="KL penalty weight to the reference policy")
    loss_aggregation: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"] = "seq_mean_token_mean"
    max_grad_norm: float = Field(1.0, gt=0, le=1e6, description="gradient clipping norm")
    micro_batch_size: int | None = Field(
        None,
        ge=1,
        le=MAX_SAMPLES_PER_STEP,
        description="completions per forward/backward pass (gradient accumulation; "
        "the same update as one pass over B); default all of B",
    )
    generation_batch_size: int | None = Field(
        None, ge=1, le=MAX_SAMPLES_PER_STEP, description="completions per generate() call; default all of B"
    )
    gradient_checkpointing: bool = Field(False, description="recompute activations in the backward pass (less memory)")
    dynamic_sampling: DynamicSamplingSpec | None = Field(
        None,
        description="DAPO's dynamic sampling, {max_batches: n}: drop the groups whose rewards are all equal and sample "
        "again until N = B / G informative groups (engine groupscale; advantage loo, mean, mean_std or loo_std; allocation "
        "uniform; the filled B is then split into the k = steps_per_generation mini-batches); default off",
    )
