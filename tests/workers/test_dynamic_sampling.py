"""grpo.dynamic_sampling in groupscale's trainer (workers/dynamic_sampling.py): which groups a step keeps, the metrics
it logs, the gradient of the kept groups against the unfiltered batch's, a whole trial, its resume and its ranks."""

import pytest
import torch

import workers.engines.groupscale as trainer
from sweeps import metrics as registry
from tests.factories import killed_and_resumed, tiny_arithmetic_lm
from workers import algos, dynamic_sampling
from workers.batch import Batch
from workers.checkpoint import load_checkpoint
from workers.dynamic_sampling import fill
from workers.engines.groupscale import TrialConfig, make_optimizer, train_trial
from workers.rollout import Rollout

BANDIT = {"name": "bandit", "contexts": 20, "arms": 6, "seed": 0}


def bandit(**over):
    base = dict(task=BANDIT, model={"preset": "tabular"}, group_size=4, samples_per_step=48, seed=0, steps=6, lr=0.5)
    return TrialConfig.flat(**{**base, **over})


def planted(rewards: list[list[float]], tag: int) -> Batch:
    """A batch of the given (N, G) rewards and loo advantages; problem (tag, i) for group i, one-token completions."""
    r = torch.tensor(rewards, dtype=torch.float32)
    n, g = r.shape
    ro = Rollout(
        input_ids=torch.arange(2 * n * g).view(n * g, 2),
        attention_mask=torch.ones(n * g, 2, dtype=torch.long),
        completion_mask=torch.ones(n * g, 1),
        prompt_len=1,
        texts=[f"{tag}.{i}" for i in range(n * g)],
        truncated=torch.tensor([i % 3 == 0 for i in range(n * g)]),
        group_size=g,
    )
    adv = algos.compute_advantages(r, "loo").reshape(-1)
    metrics = {"reward_abstentions": 1.0, "reward/f": float(tag)}
    return Batch([(tag, i) for i in range(n)], ro, r, adv, 0.5, 0.25, metrics, [g] * n)


GEN0 = [[1, 1], [0, 1], [0, 0], [1, 0]]  # informative: groups 1, 3
GEN1 = [[0, 0], [1, 0], [0, 1], [1, 0]]  # informative: 1, 2, 3
ALL_EQUAL = [[1, 1], [0, 0], [1, 1], [0, 0]]


def sampler(*generations):
    calls = []

    def sample(j):
        calls.append(j)
        return planted(generations[j], j)

    return sample, calls


def test_a_step_keeps_the_first_n_informative_groups_in_sampling_order_and_stops_there():
    """N = 4: 2 informative groups in the first generation, 3 in the second, of which the first 2 fill N; the third
    generation is never sampled. Logged: 2 generations, 4 kept, 5 of 8 sampled groups informative, 16 completions."""
    sample, calls = sampler(GEN0, GEN1, GEN1)
    out = fill(sample, cap=5)
    assert calls == [0, 1]
    assert out.batch is not None and out.batch.problems == [(0, 1), (0, 3), (1, 1), (1, 2)]
    assert out.batch.rewards.tolist() == [[0, 1], [1, 0], [1, 0], [0, 1]]
    assert out.batch.advantages.tolist() == [-1, 1, 1, -1, 1, -1, -1, 1]  # loo at G = 2: r_i - r_other
    assert out.batch.rollout.texts == ["0.2", "0.3", "0.6", "0.7", "1.2", "1.3", "1.4", "1.5"]
    assert out.metrics == {
        "dynamic_sampling/batches": 2.0,
        "dynamic_sampling/kept_groups": 4.0,
        "dynamic_sampling/informative_share": 5 / 8,
        "sampled_completions": 16.0,
    }
    # the step's seconds and reward terms are over both generations (abstentions summed, a term's mean averaged)
    assert (out.batch.seconds_generate, out.batch.seconds_score) == (1.0, 0.5)
    assert out.batch.reward_metrics == {"reward_abstentions": 2.0, "reward/f": 0.5}
    # the harness's count: signal seen; mean reward and truncated share of all 16 sampled completions
    assert out.summary == (False, 7 / 16, 6 / 16)


def test_a_step_short_at_max_batches_trains_what_it_kept_and_with_none_makes_no_update():
    short, calls = sampler(GEN0, ALL_EQUAL, GEN1)
    out = fill(short, cap=2)
    assert calls == [0, 1] and out.batch is not None and out.batch.problems == [(0, 1), (0, 3)]
    assert out.metrics["dynamic_sampling/kept_groups"] == 2.0 and out.metrics["sampled_completions"] == 16.0
    odd, _ = sampler([[1, 1], [0, 1], [0, 1], [1, 0]], ALL_EQUAL)
    assert fill(odd, cap=2, k=2).batch.problems == [(0, 1), (0, 2)]  # 3 kept, k = 2 mini-batches: 2 train
    silent, _ = sampler(ALL_EQUAL, ALL_EQUAL)
    none = fill(silent, cap=2)
    assert none.batch is None and none.summary == (True, 0.5, 6 / 16)
    assert none.metrics["dynamic_sampling/kept_groups"] == 0.0 and none.metrics["dynamic_sampling/informative_share"] == 0.0


def test_a_rank_samples_while_another_is_short_and_a_short_step_keeps_the_fewest_any_rank_kept(monkeypatch):
    """Two ranks seen from rank 0 (the other's values handed in as the collectives would): rank 1 stays short, so rank
    0, full after its first generation, samples until the cap with it; both then train the 1 group rank 1 kept."""
    monkeypatch.setattr(dynamic_sampling, "all_sum", lambda values: [v + (1.0 if i == 0 else v) for i, v in enumerate(values)])
    monkeypatch.setattr(dynamic_sampling, "all_gather", lambda obj: [obj, 1])
    sample, calls = sampler([[1, 0], [0, 1]], ALL_EQUAL, ALL_EQUAL)
    out = fill(sample, cap=3)
    assert calls == [0, 1, 2] and out.batch.problems == [(0, 0)]


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return tiny_arithmetic_lm(tmp_path_factory.mktemp("tiny"))


def _gradient(policy, batch: Batch, aggregation: str) -> torch.Tensor:
    """The gradient of one optimizer step on ``batch`` (SGD at lr 0, no clipping: the parameters stay)."""
    cfg = TrialConfig.flat(task={}, model={}, group_size=4, samples_per_step=16, seed=0, steps=1, optimizer="sgd", lr=1.0,
                           max_new_tokens=5, max_grad_norm=1e9, loss_aggregation=aggregation)  # fmt: skip
    opt = make_optimizer("sgd", policy.module.parameters(), 0.0)
    trainer._optimizer_step(policy, opt, batch, batch.all_rows, cfg, None, None)
    return torch.cat([p.grad.reshape(-1) for p in policy.module.parameters()])


@pytest.mark.parametrize("aggregation", sorted(algos.LOSS_AGGREGATIONS))
def test_with_loo_the_kept_groups_gradient_is_the_unfiltered_batchs_times_sampled_over_kept(lm, aggregation):
    """Two generations of N = 4 prompts x G = 4 completions from tiny-llama, 3 informative groups in all (short of N at
    max_batches 2, so none is cut). A dropped group's loo advantages are 0, so the kept groups' gradient is the
    gradient of the unfiltered batch of the same 32 completions rescaled by the normaliser: sequences 32 / 12 (the
    seq_mean aggregations), or the sampled tokens over the kept tokens (token_mean)."""
    prompts = [p for p in ("1+2=", "17+25=", "3+44=", "9+9=") for _ in range(4)]
    rewards = [[[1, 1, 1, 1], [0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], [[0, 0, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 1, 0]]]
    generations = []
    for j, r in enumerate(rewards):
        torch.manual_seed(j)
        ro = lm.sample(prompts, max_new_tokens=5, temperature=1.0, group_size=4)
        r = torch.tensor(r, dtype=torch.float32)
        generations.append(Batch(list(range(4)), ro, r, algos.compute_advantages(r, "loo").reshape(-1)))
    kept = fill(lambda j: generations[j], cap=2).batch
    unfiltered = dynamic_sampling.concat(generations)
    informative = torch.cat([algos.compute_advantages(g.rewards, "loo").abs().sum(1) > 0 for g in generations])
    assert informative.sum() == 3
    if aggregation == "token_mean":
        tokens = unfiltered.rollout.completion_mask.sum(1).view(8, 4)
        scale = float(tokens.sum() / tokens[informative].sum())
    else:
        scale = 32 / 12
    got, whole = _gradient(lm, kept, aggregation), _gradient(lm, unfiltered, aggregation)
    assert whole.abs().max() > 1e-3
    assert torch.allclose(got, whole * scale, rtol=1e-4, atol=1e-6), (got - whole * scale).abs().max()


class Watch:
    """Each generation sample_batch gives (its step and batch) and each optimizer step's batch and rows."""

    def __init__(self, monkeypatch):
        self.generations, self.trained = [], []
        sample, step = trainer.sample_batch, trainer._optimizer_step

        def sample_batch(policy, task, cfg, rng, at, *rest):
            batch = sample(policy, task, cfg, rng, at, *rest)
            self.generations.append((at, batch))
            return batch

        def optimizer_step(policy, opt, batch, rows, cfg, old_logp, ref_logp):
            self.trained.append((batch, rows))
            return step(policy, opt, batch, rows, cfg, old_logp, ref_logp)

        monkeypatch.setattr(trainer, "sample_batch", sample_batch)
        monkeypatch.setattr(trainer, "_optimizer_step", optimizer_step)


def test_a_trial_trains_the_first_n_informative_groups_of_its_generations_and_logs_them(monkeypatch):
    """Bandit, G = 4, B = 48 (N = 12), max_batches 3: each step's metrics count the generations it sampled, and its
    optimizer step trains the informative groups of those generations in order, the first N of them."""
    watch = Watch(monkeypatch)
    reports = []
    result = train_trial(bandit(dynamic_sampling={"max_batches": 3}), lambda m, s: reports.append((s, m)))
    assert result.status == "succeeded"
    steps = {s: m for s, m in reports if "dynamic_sampling/batches" in m}
    assert sorted(steps) == [1, 2, 3, 4, 5, 6] and len(watch.trained) == 6
    for step, m in steps.items():
        gens = [b for at, b in watch.generations if at == step]
        informative = torch.cat([b.rewards[b.rewards.amax(1) != b.rewards.amin(1)] for b in gens])
        assert m["dynamic_sampling/batches"] == len(gens) and m["sampled_completions"] == 48 * len(gens)
        assert m["dynamic_sampling/informative_share"] == pytest.approx(len(informative) / (12 * len(gens)))
        assert m["dynamic_sampling/kept_groups"] == min(12, len(informative)) == m["prompts_with_signal"]
        assert len(gens) == 3 or len(informative) >= 12  # it stopped sampling once N were kept
        batch, rows = watch.trained[step - 1]
        assert torch.equal(batch.rewards, informative[:12]) and rows == slice(0, 4 * min(12, len(informative)))
        assert "zero_variance_group_frac" not in m  # 0 by construction under the filter
    assert [key for _, m in reports for key in m if not registry.known(key)] == []  # sweeps.metrics lists them


def test_a_step_that_kept_no_group_makes_no_update_but_counts_and_logs(monkeypatch):
    """Every reward 0 (the task's rewards replaced): no group is informative, so no step updates the policy; each step
    logs its generations and 0 kept groups, and the trial ends no_signal."""
    from workers import batch as batch_module

    monkeypatch.setattr(batch_module, "score_completions", lambda task, problems, *a: _zeros(len(problems)))
    watch = Watch(monkeypatch)
    reports = []
    result = train_trial(bandit(dynamic_sampling={"max_batches": 2}, steps=3), lambda m, s: reports.append((s, m)))
    assert watch.trained == [] and result.status == "no_signal" and result.steps_done == 3
    steps = {s: m for s, m in reports if "dynamic_sampling/batches" in m}
    assert steps == {
        s: {"dynamic_sampling/batches": 2.0, "dynamic_sampling/kept_groups": 0.0, "dynamic_sampling/informative_share": 0.0,
            "sampled_completions": 96.0, "prompts_with_signal": 0.0}
        for s in (1, 2, 3)
    }  # fmt: skip


def _zeros(n):
    from workers.rewards import RewardBatch

    return RewardBatch([0.0] * n, {}, 0)


@pytest.mark.parametrize("k", [1, 2])
def test_a_killed_dynamic_sampling_trial_resumes_to_the_same_parameters_and_metrics(tmp_path, k):
    """The extra generations draw from the trial's RNGs inside their step: killed at step 5 (after the checkpoint of
    step 4), the trial resumes and ends with the parameters and result of the one that never stopped."""
    over = dict(dynamic_sampling={"max_batches": 3}, steps_per_generation=k, steps=6, checkpoint_every=2)
    straight, resumed, reports = killed_and_resumed(lambda **dirs: bandit(**over, **dirs), tmp_path)
    assert [s for s, m in reports if "resumed_from_step" in m] == [4]
    assert resumed.metrics == straight.metrics
    ours, theirs = load_checkpoint(str(tmp_path / "killed"))["model"], load_checkpoint(str(tmp_path / "straight"))["model"]
    assert all(torch.equal(ours[key], theirs[key]) for key in theirs)


def test_two_processes_fill_their_own_shares_and_stay_in_step(tmp_path):
    """B = 48, G = 4 on 2 processes, max_batches 3, k = 2: each rank keeps its 6 groups (or the fewest either kept),
    both take the same optimizer steps (their parameters never part) and the trial succeeds."""
    from tests.workers.test_distributed import _spawn

    config = bandit(dynamic_sampling={"max_batches": 3}, steps_per_generation=2, steps=4, num_processes=2).to_dict()
    assert _spawn(2, config, tmp_path / "ds") == [0, 0]
    params = [torch.load(tmp_path / f"ds.params.{r}") for r in (0, 1)]
    assert all(torch.equal(params[0][key], params[1][key]) for key in params[0])
    start = trainer.setup(TrialConfig(**config))[1].module.state_dict()
    assert max(float((params[0][key] - start[key]).abs().max()) for key in start) > 1e-3  # it trained
    result = torch.load(tmp_path / "ds.result.0", weights_only=False)
    assert result["status"] == "succeeded" and result["steps_done"] == 4
