"""One step's data: set a trial up, sample N = B / G prompts with G completions each, score them, advantages.

Shared by the GRPO trainer (workers.engines.groupscale) and the gradient-MSE measurement (workers.gradient_mse).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from sweeps.engines import get_engine
from sweeps.trial import TrialConfig
from workers import algos, groups
from workers.distributed import all_rows, rank_groups
from workers.engines.base import ALONE, Placement
from workers.models.base import Policy
from workers.models.lm import LMPolicy
from workers.models.loading import load_policy, prepare_model
from workers.models.lora import add_lora
from workers.per_prompt import PerPromptG
from workers.progress import Report, say
from workers.rewards import RewardBatch, TrainerState, metric_key
from workers.rollout import Rollout
from workers.tasks import Problem, Task, make_task
from workers.tasks.base import RewardTerms, completion_ids_of
from workers.tasks.dataset import DatasetTask


def setup(cfg: TrialConfig) -> tuple[Task, Policy, np.random.Generator]:
    """Seed everything from cfg.seed, build the task and load the policy (with its LoRA adapter, workers.models.lora);
    a dataset task is returned as the loaded model reads its prompts (DatasetTask.read_by: task.prompt_format auto is
    resolved here, the one place that knows both the task and the tokenizer, so every engine, eval and probe gets it).

    Raises:
        ValueError: a GPU asked for where there is none; an unknown task or preset, or a preset that does not fit it;
            task.prompt_format chat on a model without a chat template.
    """
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("the trial asks for a GPU (gpus_per_trial > 0) but this worker has no CUDA device")
    torch.set_num_threads(cfg.num_threads)
    torch.manual_seed(cfg.seed)
    task = make_task(cfg.task)
    policy = load_policy(cfg.model, task, Path(cfg.cache_dir), cfg.device)
    if isinstance(task, DatasetTask) and isinstance(policy, LMPolicy):  # (the spec gives a dataset task a language model)
        task = task.read_by(policy.encoder.uses_template)
    if cfg.model.get("lora") and get_engine(cfg.engine).adds_lora:  # engine trl hands TRL a peft_config instead
        policy.module = add_lora(policy.module, cfg.model["lora"])  # after the seed: the adapter's init is reproducible
    policy.module.to(cfg.device)
    # a transformers model has it; the tabular policy's module (a torch Module of ours) has nothing to checkpoint
    if cfg.grpo.gradient_checkpointing and hasattr(policy.module, "gradient_checkpointing_enable"):
        policy.module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return task, policy, np.random.default_rng(cfg.seed)


def prepare(cfg: TrialConfig, report: Report | None) -> None:
    """What the first setup of a probe or an answer makes, made first and said through ``report``: the task's data
    (stage ``data``: a data file is read) and a built-in model preset not cached yet (stage ``model``, the slow part
    of a first run: its warm start)."""
    if report is None:
        return
    path = cfg.task.get("path")
    if path:
        say(report, "data", f"reading {path} (task {cfg.task.get('name')})")
    prepare_model(cfg.model, make_task(cfg.task), Path(cfg.cache_dir), report)


@dataclass
class Batch:
    """One step's data: N prompts x G completions (B in all), completions of one group adjacent."""

    problems: list[Problem]  # (N,)
    rollout: Rollout  # S = B completions
    rewards: torch.Tensor  # (N, G) float32, as the task gives them (before reward_scale); (S,) with group_sizes
    advantages: torch.Tensor  # (B,) float32, of the scaled rewards
    seconds_generate: float = 0.0  # sampling the completions
    seconds_score: float = 0.0  # rewards, values and advantages
    reward_metrics: dict[str, float] = field(default_factory=dict)  # abstentions, each reward term's mean
    group_sizes: list[int] = field(default_factory=list)  # (N,) completions each group trains (checked_group_sizes)

    @property
    def uniform(self) -> bool:
        """Every group of the trial has one G (rewards (N, G)); False under grpo.allocation per_prompt (rewards (S,))."""
        return self.rewards.dim() == 2

    def reward_groups(self) -> list[torch.Tensor]:
        """(N,) each group's rewards, (G_x,) float32."""
        return list(self.rewards) if self.uniform else list(torch.split(self.rewards, self.group_sizes))

    @property
    def all_rows(self) -> slice:
        """The batch's S completions."""
        return slice(0, self.rollout.completion_mask.shape[0])

    def rows(self, sl: slice) -> Batch:
        """Completions ``sl`` of a uniform batch, whole groups: a mini-batch (its own problems, rewards and advantages)."""
        g = self.rewards.shape[1]
        groups = slice(sl.start // g, sl.stop // g)
        return replace(
            self,
            problems=self.problems[groups],
            rollout=self.rollout.rows(sl),
            rewards=self.rewards[groups],
            advantages=self.advantages[sl],
            group_sizes=self.group_sizes[groups],
        )


@dataclass(frozen=True)
class Generation:
    """One generation of B completions as its k = grpo.steps_per_generation trial steps train it: k mini-batches of whole
    groups, B / k completions each, in the order the prompts were sampled, and mu = inner_steps passes over them, the
    passes outside the mini-batches: verl's DataParallelPPOActor.update_policy (volcengine/verl at b178a3cd,
    verl/workers/actor/dp_actor.py: ``data.split(ppo_mini_batch_size)``, no shuffle, ``for _ in range(ppo_epochs): for
    mini_batch in mini_batches``; its ``shuffle`` defaults to false), each rank splitting its own groups as verl's do.
    The mu k optimizer steps are taken mu per trial step, so a trial step is one optimizer step at mu = 1 and the one
    batch's mu steps at k = 1 (as before k existed).

    Attributes:
        batch: this rank's groups of the generation, advantages over the whole generation's groups.
        old_logp: (S, L) the sampling policy's log-probs of ``batch``, which every step's ratio is against (None at
            k = 1: grpo_update takes them itself when mu > 1, the current ones at mu = 1).
        plans: (k,) per trial step of the generation, the rows of ``batch`` its optimizer steps train, in order.
    """

    batch: Batch
    old_logp: torch.Tensor | None
    plans: list[list[slice]]

    @classmethod
    def of(cls, batch: Batch, cfg: TrialConfig, old_logp: torch.Tensor | None = None) -> Generation:
        """The generation's plan (class docstring). Raises ValueError when k does not split this rank's groups (sweeps'
        spec refuses such a k before any trial: grpo.steps_per_generation)."""
        k, mu, n = cfg.grpo.steps_per_generation, cfg.grpo.inner_steps, len(batch.problems)
        if n % k:
            allowed = ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)
            raise ValueError(f"grpo.steps_per_generation {k} does not split {n} groups into whole groups; allowed: {allowed}")
        size = batch.all_rows.stop // k
        order = [slice(j * size, (j + 1) * size) for _ in range(mu) for j in range(k)]  # mu passes over k mini-batches
        return cls(batch, old_logp, [order[i * mu : (i + 1) * mu] for i in range(k)])

    def view(self, i: int) -> Batch:
        """The data step ``i`` of the generation reports: its last optimizer step's mini-batch (the batch at k = 1); the
        generation's sampling and scoring seconds and reward terms at its first step only."""
        if len(self.plans) == 1:
            return self.batch
        view = self.batch.rows(self.plans[i][-1])
        return view if i == 0 else replace(view, seconds_generate=0.0, seconds_score=0.0, reward_metrics={})


def trainer_state(cfg: TrialConfig, task: Task, global_step: int, log_history: list[dict] | None = None) -> TrainerState:
    """TRL's ``trainer_state`` for reward functions after ``global_step`` optimizer steps of this trial; epochs
    count training prompts drawn (N / k per optimizer step: a generation of N every k) against the task's training rows
    (0 for generated tasks)."""
    rows = task.train_rows if isinstance(task, RewardTerms) else 0  # a generated task has no rows
    per_step = cfg.prompts_per_step / cfg.grpo.steps_per_generation / rows if rows else 0.0  # epochs per optimizer step
    return TrainerState(
        global_step=global_step,
        max_steps=cfg.steps,
        epoch=global_step * per_step,
        num_train_epochs=cfg.steps * per_step,
        train_batch_size=cfg.samples_per_step,
        log_history=log_history if log_history is not None else [],
    )


def score_completions(
    task: Task, problems: list[Problem], rollout: Rollout, rng: np.random.Generator, state: TrainerState | None = None
) -> RewardBatch:
    """Rewards of a rollout's completions; tasks with reward functions (dataset) also give each term, the
    abstentions and what the functions logged. Raises workers.rewards.RewardError when a reward function fails."""
    if isinstance(task, RewardTerms):  # only reward functions read the token ids (building them is per-row work)
        return task.score(problems, rollout.texts, completion_ids_of(rollout), state)
    return RewardBatch(task.rewards(problems, rollout.texts, rng), {}, 0)


def checked_group_sizes(rollout: Rollout, sizes: list[int], step: int) -> list[int]:
    """The completions each group of ``rollout`` trains (groups.realized_group_sizes; a row's prompt: its prompt token
    ids where the attention mask is 1), checked to be the configured ``sizes`` (one int per group) at ``step``.

    Raises:
        workers.groups.GroupSizeError: a group of another size (the policy dropped, merged or repeated completions).
    """
    p = rollout.prompt_len
    prompts = [tuple(ids[mask == 1].tolist()) for ids, mask in zip(rollout.input_ids[:, :p], rollout.attention_mask[:, :p])]
    realized = groups.realized_group_sizes(prompts, sizes)
    groups.check_group_sizes(realized, sizes, step)
    return realized


def sample_batch(
    policy: Policy,
    task: Task,
    cfg: TrialConfig,
    rng: np.random.Generator,
    step: int = 1,
    log_history: list[dict] | None = None,
    allocation: PerPromptG | None = None,
    placement: Placement = ALONE,
    draw: int = 0,
) -> Batch:
    """Sample N = B/G prompts, G completions each, score them and compute group advantages.

    With ``allocation`` (grpo.allocation per_prompt, one process) each prompt gets its own G (workers.per_prompt),
    B completions in all, and the advantages weight every prompt 1/N (algos.per_prompt_advantages).

    On several processes (``placement``; workers.distributed) each rank samples and scores its share of the N groups
    (its ``rank_groups``) and the batch holds those; advantages are computed on the step's N groups (rewards gathered).

    Generation runs ``generation_batch_size`` completions at a time (rounded down to whole groups).
    ``step`` is the optimizer step this batch is for (1-based); reward functions see ``step - 1`` steps done
    and ``log_history`` (the trainer's reported metrics) in their trainer_state, as in TRL. ``draw``: the step's
    generation (grpo.dynamic_sampling samples several; 0 the first), so each has rank-local draws of its own.

    Raises:
        workers.groups.GroupSizeError: a group of the rollout holds other than G completions of its prompt.
        workers.rewards.RewardError: a reward function failed.
        workers.decode.NonFiniteLogitsError: the policy produced NaN or infinite logits while sampling.
    """
    rank, world_size = placement.rank, placement.world_size
    if allocation is None:  # N = B / G prompts, every rank draws them (the prompt RNG stays equal on all)
        mine = rank_groups(cfg.prompts_per_step, rank, world_size)  # this rank's groups (all of them on one process)
        problems = task.sample_train(cfg.prompts_per_step, rng)[mine]
        sizes = [cfg.group_size] * len(problems)
    else:  # one process (sweeps.spec): prompts drawn until their G fill B
        problems, sizes = allocation.layout(task.sample_train(cfg.samples_per_step // 2, rng), cfg.samples_per_step)
    # a rank's own draws (a stochastic task's rewards) come from a generator of its own, so the shared one stays shared
    draws = rng if world_size == 1 else np.random.default_rng([cfg.seed, step, rank] + ([draw] if draw else []))
    expanded = [p for p, g in zip(problems, sizes) for _ in range(g)]
    hint = cfg.group_size if allocation is None else 1  # rows come in groups of G (a sampler may share their prompt)
    t0 = time.perf_counter()
    ro = _generate(policy, [p.prompt for p in expanded], sizes, cfg, hint)
    t1 = time.perf_counter()
    realized = checked_group_sizes(ro, sizes, step)  # before the (N, G) view: it names a cut group's size
    scored = score_completions(task, expanded, ro, draws, trainer_state(cfg, task, max(0, step - 1), log_history))
    flat = torch.as_tensor(scored.rewards)
    values = _values(policy, task, problems, cfg) if cfg.grpo.advantage in algos.NEEDS_VALUES else None
    if allocation is None:
        rewards = flat.view(len(problems), cfg.group_size)
        # advantages over the step's N groups (a batch-level normaliser sees every rank's), then this rank's rows
        adv = algos.compute_advantages(all_rows(rewards) * cfg.grpo.reward_scale, cfg.grpo.advantage, values)
        adv = adv[mine].reshape(-1)
    else:
        rewards = flat
        adv = algos.per_prompt_advantages(flat * cfg.grpo.reward_scale, sizes, cfg.grpo.advantage, values)
    extra = {"reward_abstentions": float(scored.abstained)} if scored.per_function else {}
    extra |= {f"reward/{key}": float(np.nanmean(v)) for key, v in scored.per_function.items() if not np.isnan(v).all()}
    extra |= {f"reward_log/{metric_key(name)}": v for name, v in scored.logged.items()}  # TRL's log_metric
    seconds = {"seconds_generate": t1 - t0, "seconds_score": time.perf_counter() - t1}
    return Batch(problems, ro, rewards, adv, **seconds, reward_metrics=extra, group_sizes=realized)


def _generate(policy: Policy, prompts: list, sizes: list[int], cfg: TrialConfig, hint: int) -> Rollout:
    """The step's completions of ``prompts`` (one per completion row, groups of ``sizes`` adjacent), sampled
    ``generation_batch_size`` at a time in whole groups; ``hint``: G when rows come in groups of G (a sampler may
    share their prompt), else 1."""
    chunks = [
        policy.sample(prompts[lo:hi], max_new_tokens=cfg.grpo.max_new_tokens, temperature=cfg.grpo.temperature, group_size=hint)
        for lo, hi in generation_chunks(sizes, cfg.grpo.generation_batch_size)
    ]
    return Rollout.concat(chunks, group_size=hint)


def _values(policy: Policy, task: Task, problems: list[Problem], cfg: TrialConfig) -> torch.Tensor:
    """V(x) of the step's prompts (the oracle baseline): (N,) float32, scaled as the rewards, every rank's rows."""
    with torch.no_grad():
        values = task.expected_reward(policy, problems, max_new_tokens=cfg.grpo.max_new_tokens, temperature=cfg.grpo.temperature)
    return all_rows(values.float().cpu() * cfg.grpo.reward_scale)


def generation_chunks(sizes: list[int], limit: int | None) -> list[tuple[int, int]]:
    """Row ranges [lo, hi) of at most ``limit`` completions each (None: one range), made of whole groups of
    ``sizes`` (N,) and at least one group each."""
    chunks, lo, hi = [], 0, 0
    for g in sizes:
        if limit and hi > lo and hi + g - lo > limit:
            chunks.append((lo, hi))
            lo = hi
        hi += g
    return [*chunks, (lo, hi)]
