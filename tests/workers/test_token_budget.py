"""tokens_per_step in groupscale's trainer (workers/token_budget.py): the prompts each generation samples, the spend it
keeps to the budget, a whole trial, its resume and its checkpoint."""

import numpy as np
import pytest
import torch

from sweeps import metrics as registry
from tests.factories import killed_and_resumed
from workers.checkpoint import load_checkpoint
from workers.engines.groupscale import TrialConfig, train_trial
from workers.token_budget import TokenBudget


def controller(tokens=150, g=4, cap=16, k=1, processes=1, first=6) -> TokenBudget:
    cfg = TrialConfig.flat(
        task={"name": "arithmetic"}, model={"preset": "tiny-llama"}, group_size=g, samples_per_step=cap * g, seed=0, steps=1,
        max_new_tokens=first, steps_per_generation=k, num_processes=processes, tokens_per_step=tokens,
    )  # fmt: skip
    return TokenBudget.of(cfg)


def spend(budget: TokenBudget, lengths) -> list[float]:
    """Runs the controller over generations whose completions have the mean lengths ``lengths`` (one a generation);
    returns the cumulative spend after each."""
    out = []
    for length in lengths:
        n = budget.next_prompts()
        budget.record(n * budget.group_size * length, n * budget.group_size)
        out.append(budget.spent)
    return out


def test_the_first_generation_assumes_the_longest_completions_then_follows_the_last_length():
    """Check values by hand: Z = 150, G = 4, max_new_tokens 6: N = round(150 / 24) = 6; 24 completions of mean 4.667
    (112 tokens) leave 300 - 112 = 188 for the second, N = round(188 / (4 x 4.667)) = 10."""
    budget = controller()
    assert budget.next_prompts() == 6
    metrics = budget.record(112.0, 24)
    assert metrics == {
        "token_budget/prompts": 6.0,
        "token_budget/completion_tokens": 112.0,
        "token_budget/spent_share": 112 / 150,
    }
    assert budget.next_prompts() == 10
    assert set(metrics) <= set(registry.STEP)  # every logged name is described


def test_the_spend_stays_within_a_generations_rounding_of_the_budget_while_lengths_drift():
    """Lengths that grow from 2 to 10 tokens over 200 generations (the last generation's always short of the next).
    The first generation, sized for 10-token completions, spends 80 of 400; with the cap at 64 prompts the next three
    catch up, and from then on the cumulative spend after j generations stays within q G l_max / 2 + N_max G dl of
    j k Z (THEORY.md's bound: one generation's rounding plus its length's step dl = 8 / 199 from the last); sized for
    k Z alone (no carried spend) it would miss by up to 359 tokens."""
    lengths = np.linspace(2.0, 10.0, 200)
    budget = controller(tokens=400, g=4, cap=64, first=10)
    spent = np.array(spend(budget, lengths))
    target = 400.0 * np.arange(1, 201)
    assert spent[0] == 80.0 and spent[1] < target[1]
    assert np.abs(spent - target)[4:].max() <= 1 * 4 * 10.0 / 2 + 64 * 4 * 8 / 199
    assert spent[-1] / target[-1] == pytest.approx(1.0, abs=0.002)


@pytest.mark.parametrize("k, processes", [(1, 1), (2, 1), (1, 3), (2, 2)])
def test_n_is_a_multiple_of_k_times_the_processes_within_one_and_the_cap(k, processes):
    budget = controller(tokens=90, g=2, cap=13, k=k, processes=processes, first=3)
    q = k * processes
    rng = np.random.default_rng(0)
    for length in rng.uniform(0.2, 3.0, 100):
        n = budget.next_prompts()
        assert n % q == 0 and q <= n <= 13
        budget.record(n * 2 * length, n * 2)
    assert budget.max_prompts == 13 // q * q


def test_a_budget_no_cap_can_hold_trains_the_cap_and_says_it_is_short():
    budget = controller(tokens=1000, g=4, cap=8, first=6)
    for _ in range(3):
        assert budget.next_prompts() == 8
        metrics = budget.record(8 * 4 * 6.0, 32)
    assert metrics["token_budget/spent_share"] == pytest.approx(3 * 192 / 3000)


def arithmetic(**over) -> TrialConfig:
    base = dict(
        task={"name": "arithmetic"}, model={"preset": "tiny-llama"}, group_size=4, samples_per_step=64,
        seed=0, steps=8, lr=5e-4, max_new_tokens=6, tokens_per_step=150, eval_prompts=16,
    )  # fmt: skip
    return TrialConfig.flat(**{**base, **over})


def test_a_trial_samples_the_controllers_prompts_and_logs_what_they_cost(model_cache):
    reports = []
    result = train_trial(arithmetic(cache_dir=str(model_cache)), lambda m, s: reports.append((s, m)))
    assert result.status == "succeeded"
    steps = [m for s, m in reports if "token_budget/prompts" in m]
    assert len(steps) == 8
    budget = TokenBudget.of(arithmetic())  # fed the trial's own logged tokens, the controller gives its N back
    for m in steps:
        n = budget.next_prompts()
        assert m["token_budget/prompts"] == n and m["prompts_with_signal"] <= n
        assert m["completion_tokens_mean"] * n * 4 == pytest.approx(m["token_budget/completion_tokens"])
        budget.record(m["token_budget/completion_tokens"], n * 4)
    assert {m["token_budget/prompts"] for m in steps} != {16.0}  # not the cap's B / G: the budget sized them
    assert abs(budget.spent - 8 * 150) <= 4 * 6 / 2 + 4 * 6


def test_a_killed_trial_resumes_with_its_spend_and_ends_as_the_one_that_never_stopped(tmp_path, model_cache):
    over = dict(steps=6, checkpoint_every=2, cache_dir=str(model_cache))

    def four_generations_spent(folder):
        assert load_checkpoint(str(folder))["token_budget"]["generations"] == 4

    straight, resumed, reports = killed_and_resumed(lambda **dirs: arithmetic(**over, **dirs), tmp_path, four_generations_spent)
    assert [s for s, m in reports if "resumed_from_step" in m] == [4]
    assert resumed.metrics == straight.metrics
    ours, theirs = load_checkpoint(str(tmp_path / "killed"))["model"], load_checkpoint(str(tmp_path / "straight"))["model"]
    assert all(torch.equal(ours[key], theirs[key]) for key in theirs)


def test_an_answers_pilot_at_a_share_of_b_trains_that_share_of_the_token_budget():
    """The pilot samples at most its own B (a share of the spec's): a budget of Z tokens kept whole would underspend
    there (96 at B 24 with 4-token completions against Z 192), so it trains Z B' / B; the halving's rungs at B keep Z."""
    from sweeps.answer import Halving, Pilot
    from sweeps.answer.plan import Probe
    from workers.answers.stages import _pilot_config, _rung_config
    from workers.token_budget import at_budget

    base = arithmetic(samples_per_step=48, tokens_per_step=192, max_new_tokens=4)
    pilot = Pilot(4, 24, 10, Probe(16, 4), 2, 32, 0)
    assert _pilot_config(base, pilot).tokens_per_step == 96 and _pilot_config(base, pilot).samples_per_step == 24
    rungs = Halving(48, (2, 4), 2, (5, 10), (2, 1), True, 32, 0)
    assert _rung_config(base, rungs, 2, 0, 5, "/tmp").tokens_per_step == 192
    assert at_budget(arithmetic(samples_per_step=96, tokens_per_step=200), 36) == 75
    assert at_budget(arithmetic(tokens_per_step=None), 24) is None
