"""A trial on several processes (workers.distributed): the split keeps groups whole, and one step of groupscale's
update on 2 processes (gloo, CPU) leaves the parameters that a 1-process step on the same batch leaves."""

import os
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from sweeps.trial import TrialConfig
from tests.killed_ranks import processes
from tests.ports import free_port
from workers.batch import Batch, sample_batch, setup
from workers.distributed import rank_groups
from workers.engines.groupscale import grpo_update, make_optimizer
from workers.models.presets import preset_path
from workers.tasks import make_task

TASK = {"name": "arithmetic", "max_operand": 19}


def test_groups_are_split_whole_as_evenly_as_possible():
    assert [rank_groups(5, r, 2) for r in (0, 1)] == [slice(0, 3), slice(3, 5)]
    assert [rank_groups(6, r, 3) for r in range(3)] == [slice(0, 2), slice(2, 4), slice(4, 6)]
    assert rank_groups(4, 0, 1) == slice(0, 4)
    with pytest.raises(ValueError, match="3 groups \\(B / G\\) cannot be split over 4 processes"):
        rank_groups(3, 0, 4)


def test_a_steps_metrics_over_ranks_take_the_realized_sizes_min_and_max_and_weigh_the_shares(monkeypatch):
    """reduce_metrics on two ranks (their metrics handed in as all_gather would): the realized group sizes are the
    smallest and largest over every rank's groups, a share of groups the mean weighted by each rank's completions."""
    from workers import distributed

    parts = [
        ({"realized_group_size_min": 4.0, "realized_group_size_max": 5.0, "frac_groups_all_wrong": 0.5}, 8.0),
        ({"realized_group_size_min": 3.0, "realized_group_size_max": 4.0, "frac_groups_all_wrong": 0.0}, 24.0),
    ]
    monkeypatch.setattr(distributed, "_world_size", lambda: 2)
    monkeypatch.setattr(distributed, "all_gather", lambda obj: parts)
    out = distributed.reduce_metrics(parts[0][0], parts[0][1])
    assert out == {"realized_group_size_min": 3.0, "realized_group_size_max": 5.0, "frac_groups_all_wrong": 0.125}


def shard(batch: Batch, rank: int, world_size: int) -> Batch:
    """The part of a whole step's batch (N groups of G, advantages computed on all of it, as one process samples it)
    that ``rank`` trains on: both layouts then train on the same batch."""
    groups = rank_groups(len(batch.problems), rank, world_size)
    g = batch.rewards.shape[1]
    rows = slice(groups.start * g, groups.stop * g)
    return Batch(
        problems=batch.problems[groups],
        rollout=batch.rollout.rows(rows),
        rewards=batch.rewards[groups],
        advantages=batch.advantages[rows],
        seconds_generate=batch.seconds_generate,
        seconds_score=batch.seconds_score,
        reward_metrics=dict(batch.reward_metrics),
    )


def _one_step(rank: int, world_size: int, port: int, config: dict, out: str) -> None:
    """Spawned: rank ``rank`` of ``world_size`` samples the step's whole batch (same seed everywhere), takes its
    groups and makes one update; rank 0 saves the parameters and the update's statistics."""
    torch.set_num_threads(1)
    cfg = TrialConfig(**config)
    task, policy, rng = setup(cfg)
    batch = sample_batch(policy, task, cfg, rng)  # before the process group: the whole batch, as one process samples it
    if world_size > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    opt = make_optimizer(cfg.grpo.optimizer, [p for p in policy.module.parameters() if p.requires_grad], cfg.grpo.lr)
    stats = grpo_update(policy, None, opt, shard(batch, rank, world_size), cfg)
    if rank == 0:
        params = {k: v.detach().clone() for k, v in policy.module.state_dict().items()}
        torch.save({"params": params, "stats": asdict(stats)}, out)
    if world_size > 1:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    "grpo",
    [
        {"loss_aggregation": "token_mean", "micro_batch_size": 4},  # the step's token count normalises every rank
        {"loss_aggregation": "seq_mean_token_mean", "inner_steps": 2},  # clipping, and the overshoot over ranks
    ],
    ids=["token_mean", "seq_mean_token_mean-mu2"],
)
def test_two_processes_take_the_step_one_process_takes_on_the_same_batch(model_cache, tmp_path, grpo):
    """B = 24 completions in 6 groups of 4, 3 groups on each rank. The two updates agree within float32 rounding of
    the summation order: the largest parameter difference at most 1e-4 of the largest parameter move (measured:
    1.5e-8 against 1.8e-2), where a normaliser of one rank's share or a missing gradient sum is off by about the whole move; the
    logged loss and statistics agree too. With SGD the update is linear in the gradient; AdamW's first step is
    lr g / (|g| + eps), which makes the rounding of a gradient near eps visible (one element of 4096 off by 2e-6 at
    lr 5e-3), a property of Adam, not of the split."""
    preset_path("tiny-llama", make_task(TASK), model_cache)  # built once here, read by both processes
    config = TrialConfig.flat(
        task=TASK,
        model={"preset": "tiny-llama"},
        cache_dir=str(model_cache),
        group_size=4,
        samples_per_step=24,
        seed=3,
        steps=1,
        max_new_tokens=6,
        lr=0.05,
        optimizer="sgd",
        max_grad_norm=1e6,  # no clipping: a clipped step has the same size whatever the gradient's scale
        **grpo,
    ).to_dict()
    ctx = processes()
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    for world_size, out in ((1, one), (2, two)):  # the 1-process step in a process of its own too: same settings
        port = free_port()
        procs = [ctx.Process(target=_one_step, args=(r, world_size, port, config, str(out))) for r in range(world_size)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=300)
            assert p.exitcode == 0, f"rank of world {world_size} exited {p.exitcode}"
    a, b = torch.load(one), torch.load(two)
    start = setup(TrialConfig(**config))[1].module.state_dict()
    moved = max(float((a["params"][k] - start[k]).abs().max()) for k in start)
    apart = max(float((b["params"][k] - a["params"][k]).abs().max()) for k in start)
    assert moved > 1e-3  # the step changed the model
    assert apart <= 1e-4 * moved, (apart, moved)  # a wrong normaliser or a missing gradient sum is off by ~moved
    for key in ("loss", "grad_norm", "entropy", "clip_frac_low", "clip_frac_high", "momentum_overshoot_frac"):
        assert b["stats"][key] == pytest.approx(a["stats"][key], rel=1e-5, abs=1e-7), key


def _trial(rank: int, world_size: int, port: int, config: dict, out: str, crash_at: int) -> None:
    """Spawned: rank ``rank`` runs the whole trial (workers.engines.groupscale.train_trial) in a process group and
    saves its parameters after the last step and its result. ``crash_at``: rank 0's process dies when step
    ``crash_at`` is reported (before that step's checkpoint), as a killed worker does."""
    from workers.distributed import join, leave
    from workers.engines import groupscale
    from workers.engines.base import Placement
    from workers.engines.harness import Harness

    torch.set_num_threads(1)
    join(f"tcp://127.0.0.1:{port}", Placement(rank, world_size), timeout_s=120)
    finish = Harness.finish

    def keep_parameters(self):  # noqa: ANN001, ANN202 - Harness.finish's own
        torch.save({k: v.detach().clone() for k, v in self.policy.module.state_dict().items()}, f"{out}.params.{rank}")
        return finish(self)

    def report(metrics: dict, step: int) -> None:
        if step == crash_at and "reward_mean" in metrics:
            os._exit(3)

    Harness.finish = keep_parameters
    result = groupscale.train_trial(TrialConfig(**config), report, Placement(rank, world_size))
    torch.save(asdict(result), f"{out}.result.{rank}")
    leave()


def _spawn(world_size: int, config: dict, out: Path, crash_at: int = 0) -> list[int | None]:
    """Run ``_trial`` on ``world_size`` spawned processes; their exit codes."""
    ctx, port = processes(), free_port()
    procs = [ctx.Process(target=_trial, args=(r, world_size, port, config, str(out), crash_at)) for r in range(world_size)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    return [p.exitcode for p in procs]


def test_a_two_process_lora_trial_trains_only_the_adapter_and_resumes_to_the_same_result(model_cache, tmp_path):
    """A whole trial on 2 processes (gloo): both ranks end with the same parameters, of which only LoRA's moved; rank
    0's process killed at step 3 (rank 1's collective then raises: it does not wait) and both started again resume
    from the checkpoint of step 2 to the parameters and metrics of the trial that never stopped."""
    preset_path("tiny-llama", make_task(TASK), model_cache)
    config = TrialConfig.flat(
        task=TASK,
        model={"preset": "tiny-llama", "lora": {"r": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": "all-linear"}},
        cache_dir=str(model_cache),
        group_size=4,
        samples_per_step=16,
        seed=5,
        steps=4,
        max_new_tokens=6,
        lr=0.005,  # every step has signal (at 0.05 the adapter breaks the model by step 3: zero gradients after)
        eval_prompts=32,
        eval_every=0,
        checkpoint_every=2,
        num_processes=2,
        checkpoint_dir=str(tmp_path / "whole"),
    ).to_dict()
    assert _spawn(2, config, tmp_path / "whole") == [0, 0]
    params = [torch.load(tmp_path / f"whole.params.{r}") for r in (0, 1)]
    start = setup(TrialConfig(**config))[1].module.state_dict()  # the adapter's initialisation included
    for key in start:
        assert torch.equal(params[0][key], params[1][key]), key  # the ranks' models never part
    moved = {k for k in start if not torch.equal(params[0][k], start[k])}
    assert moved and all("lora_" in k for k in moved), sorted(moved)[:5]

    stopped = {**config, "checkpoint_dir": str(tmp_path / "stopped")}
    codes = _spawn(2, stopped, tmp_path / "stopped", crash_at=3)
    assert codes[0] == 3 and codes[1] not in (0, None), codes  # rank 1 raised (a closed connection), did not hang
    assert torch.load(tmp_path / "stopped" / "checkpoint.pt", weights_only=False)["trial"]["step"] == 2
    assert _spawn(2, stopped, tmp_path / "stopped") == [0, 0]
    again = torch.load(tmp_path / "stopped.params.0")
    for key in start:
        assert torch.equal(again[key], params[0][key]), key
    whole, resumed = (torch.load(tmp_path / f"{name}.result.0", weights_only=False) for name in ("whole", "stopped"))
    assert resumed["status"] == whole["status"] == "succeeded"
    assert resumed["metrics"] == whole["metrics"]


TOKENS = "def tokens(completion_ids, **kwargs):\n    return [float(sum(ids) % 7) for ids in completion_ids]\n"  # signal


def _fixed_generate(self, input_ids=None, attention_mask=None, generation_config=None, **kwargs):  # noqa: ANN001, ANN202
    """A stand-in for transformers' generate that makes the same completions on any process layout: each row's tokens
    come from a generator seeded by its prompt (padding left out) and how many rows before it in the call had the same
    prompt (its place in its group), so a group's completions differ and no RNG state matters."""
    import zlib

    seen: dict[bytes, int] = {}
    rows = []
    for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
        key = bytes(str([t for t, m in zip(ids, mask, strict=True) if m]), "utf-8")
        place = seen[key] = seen.get(key, -1) + 1
        g = torch.Generator().manual_seed(zlib.crc32(key) * 16 + place)
        rows.append(torch.randint(3, self.config.vocab_size, (generation_config.max_new_tokens,), generator=g))
    return torch.cat([input_ids, torch.stack(rows).to(input_ids.device)], dim=1)


def _trl_step(rank: int, world_size: int, port: int, config: dict, out: str) -> None:
    """Spawned: a one-step TRL trial on rank ``rank`` of ``world_size`` with _fixed_generate; rank 0's checkpoint after
    the step holds the parameters."""
    from transformers.generation.utils import GenerationMixin

    from workers.distributed import join, leave
    from workers.engines.base import Placement
    from workers.engines.trl import train_trial_trl

    class Report:  # what the trial logs: the GRPOConfig TRL ran, TRL's step metrics
        params: dict = {}
        steps: dict = {}

        def __call__(self, metrics: dict, step: int) -> None:
            self.steps.setdefault(step, {}).update(metrics)

        def log_params(self, params: dict) -> None:
            self.params.update(params)

    GenerationMixin.generate = _fixed_generate
    torch.set_num_threads(1)
    if world_size > 1:
        join(f"tcp://127.0.0.1:{port}", Placement(rank, world_size), timeout_s=120)
    report = Report()
    result = train_trial_trl(TrialConfig(**config), report, Placement(rank, world_size))
    torch.save({"result": asdict(result), "params": report.params, "steps": report.steps}, f"{out}.{rank}")
    leave()


@pytest.mark.slow  # 80-90 s on 2 cores (TRL and accelerate in two processes): make test stays under 20 minutes
def test_two_trl_processes_take_the_step_one_trl_process_takes_on_the_same_batch(model_cache, tmp_path):
    """TRL (accelerate's DDP on this gloo group) on 2 processes against 1, on the same batch: generation is replaced
    by _fixed_generate (TRL seeds each process's sampler apart, so no two layouts sample alike otherwise). One
    optimizer step of B = 8 (2 groups of 2 on each rank, per_device_train_batch_size 4): the parameters agree within
    float32 rounding of the summation order, at most 1e-4 of the largest move (measured: 6.0e-8 against 4.1e-3;
    without accelerate taking the group, each rank trains alone: 4.2e-3 apart). Rank 0 alone logs."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from tests.user_material import word_problem_rows, write_parquet

    folder = preset_path("chat-tiny", None, model_cache)
    data = write_parquet(word_problem_rows(40), tmp_path / "train.parquet")
    (tmp_path / "tokens.py").write_text(TOKENS)
    recipe = {"learning_rate": "1e-2", "max_completion_length": 8, "beta": 0.0, "loss_type": "dapo", "optim": "sgd",
              "lr_scheduler_type": "constant", "max_grad_norm": 1e6}  # fmt: skip
    params = {}
    for world_size in (1, 2):
        config = TrialConfig.flat(
            task={"name": "dataset", "path": str(data), "rewards": [{"function": f"{tmp_path / 'tokens.py'}:tokens"}]},
            model={"path": str(folder)},
            group_size=2,
            samples_per_step=8,
            seed=0,
            steps=1,
            eval_prompts=4,
            eval_samples_per_prompt=1,
            cache_dir=str(model_cache),
            engine="trl",
            trl=recipe,
            max_new_tokens=8,
            checkpoint_dir=str(tmp_path / f"world{world_size}"),
            checkpoint_every=1,
            num_processes=world_size,
        ).to_dict()
        ctx, port, out = processes(), free_port(), str(tmp_path / f"w{world_size}")
        procs = [ctx.Process(target=_trl_step, args=(r, world_size, port, config, out)) for r in range(world_size)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=300)
        assert [p.exitcode for p in procs] == [0] * world_size
        ranks = [torch.load(f"{out}.{r}", weights_only=False) for r in range(world_size)]
        assert {r["result"]["status"] for r in ranks} == {"succeeded"}, [r["result"] for r in ranks]
        ran = ranks[0]["params"]  # B = 8 a step either way: 8 on one process, 4 on each of two
        assert (ran["trl.generation_batch_size"], ran["trl.per_device_train_batch_size"]) == ("8", str(8 // world_size))
        assert all(not r["params"] and not r["steps"] for r in ranks[1:]) and "gap" in ranks[0]["result"]["metrics"]
        params[world_size] = load_file(tmp_path / f"world{world_size}" / "checkpoint-1" / "model.safetensors")
    start = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    keys = [k for k in params[1] if k in start]
    moved = max(float((params[1][k] - start[k]).abs().max()) for k in keys)
    apart = max(float((params[2][k] - params[1][k]).abs().max()) for k in keys)
    assert moved > 1e-4, moved  # the step changed the model
    assert apart <= 1e-4 * moved, (apart, moved)


def test_rank_0s_rendezvous_port_is_held_from_its_choice_to_its_use():
    """The port rank 0's address names is held by its store from the moment it is chosen: another process cannot bind
    it meanwhile (a port found free, released and bound again later was taken in between: EADDRINUSE for good), and
    another rank's store reaches it there."""
    import socket
    from datetime import timedelta

    from workers.distributed import rendezvous

    store, master = rendezvous("127.0.0.1", 2, timeout_s=60)
    host, _, port = master.removeprefix("tcp://").rpartition(":")
    with socket.socket() as other, pytest.raises(OSError):
        other.bind((host, int(port)))
    rank1 = dist.TCPStore(host, int(port), 2, is_master=False, timeout=timedelta(seconds=30))
    store.set("step", "4")
    assert rank1.get("step") == b"4"
