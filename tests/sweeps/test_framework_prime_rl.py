"""prime-rl's configs in the budget vocabulary and back (sweeps.frameworks.prime_rl), on files written in its shapes
(tests/fixtures/frameworks/prime-rl/, each citing the upstream file it copies the shape of)."""

import difflib
from pathlib import Path

import pytest

import sweeps.frameworks.prime_rl  # noqa: F401  (registers prime-rl)
from sweeps.engines import Recipe
from sweeps.frameworks import Refused, get_framework
from sweeps.frameworks.editing import ObjectiveDiffers, edit_config, file_budget
from sweeps.frameworks.importing import recognise, spec_from
from sweeps.spec import SweepSpec
from sweeps.spec.grpo import GRPOSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
HERE = FIXTURES / "prime-rl"
DROPS = ("orchestrator.async", "trainer.loss.type", "orchestrator.train.filter_zero_advantages")  # what every file needs
DROPPED = tuple(f"{key}=null" for key in DROPS)  # as spec_from passes --drop KEY


def budget(file: str, *overrides: str):
    return file_budget(get_framework("prime-rl"), HERE / file, (*DROPPED, *overrides))


def changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm="")
    return [line[1:] for line in diff if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]


def test_the_reverse_text_shape_gives_g_16_and_b_128_completions_with_one_step_a_batch():
    """batch_size counts completions already: B = 128, 8 prompts of G = 16; one optimizer step a batch, r - group mean."""
    got = budget("rl.toml")
    assert (got.group_size, got.samples_per_step, got.steps, got.data) == (16, 128, 20, "reverse-text")
    assert got.grpo == {
        "steps_per_generation": 1, "inner_steps": 1, "loss_aggregation": "token_mean", "advantage": "mean",
        "importance_sampling_level": "token", "clip_eps": 0.2, "kl_beta": 0.0, "lr": 3e-6, "temperature": 1.0,
        "max_new_tokens": 128,
    }  # fmt: skip
    assert got.model == "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT"


def test_the_split_form_and_the_old_names_read_the_same_run():
    split = budget("split/orch.toml")  # train.toml beside it gives the lr
    old = budget("rl_old_names.toml")
    new = budget("rl.toml")
    assert (split.group_size, split.samples_per_step, split.grpo) == (new.group_size, new.samples_per_step, new.grpo)
    assert (old.group_size, old.samples_per_step, old.grpo) == (new.group_size, new.samples_per_step, new.grpo)
    config = get_framework("prime-rl").read(HERE / "rl_old_names.toml", list(DROPPED))
    get_framework("prime-rl").budget(config)
    assert "read orchestrator.rollouts_per_example as orchestrator.group_size: prime-rl renamed it in 20f6449e and " \
        "refuses the old name since d612e23" in config.assumed  # fmt: skip
    assert any(n.startswith("read orchestrator.sampling.max_tokens as orchestrator.train.sampling.max_completion_tokens")
               for n in config.assumed)  # fmt: skip


def test_prime_rls_own_flags_and_key_value_overrides_both_reach_the_budget():
    flags = budget(
        "rl.toml", "--orchestrator.group-size", "8", "--trainer.optim.lr=1e-5", "--no-orchestrator.train.filter-zero-advantages"
    )
    assert (flags.group_size, flags.samples_per_step, flags.grpo["lr"]) == (8, 128, 1e-5)
    split = budget("split/orch.toml", "group_size=32", "--orchestrator.batch-size", "256")  # the split file's own keys
    assert (split.group_size, split.samples_per_step) == (32, 256)
    with pytest.raises(ValueError, match="'@ FILE'"):
        budget("rl.toml", "--trainer", "@", "trainer.toml")


def test_the_default_file_is_refused_naming_the_first_setting_and_the_others_after_it():
    with pytest.raises(Refused, match=r"^orchestrator.async: 'one step': prime-rl's trainer runs one step ahead of "
                       r".*--drop orchestrator.async measures G on-policy.*\(refused after it too: trainer.loss.type, "
                       r"orchestrator.train.filter_zero_advantages\)$"):  # fmt: skip
        file_budget(get_framework("prime-rl"), HERE / "rl.toml")
    with pytest.raises(Refused, match=r"^trainer.loss.type: 'default': trains DPPO's mask .*0.2/0.2.*kl_tau = 0.001.*"
                       r"--drop trainer.loss.type trains that at groupscale's default clip_eps 0.2"):  # fmt: skip
        file_budget(get_framework("prime-rl"), HERE / "rl.toml", ("orchestrator.async=null",))


@pytest.mark.parametrize(
    ("override", "refused"),
    [
        ("orchestrator.group_size=1", r"orchestrator.group_size: 1: GRPO samples G >= 2"),
        ("orchestrator.batch_size=100", r"orchestrator.batch_size: 100: is not divisible by G = 16"),
        ("orchestrator.token_batch_size=8192", r"orchestrator.token_batch_size: 8192: counts tokens"),
        ("orchestrator.algo.type=max_rl", r"orchestrator.algo.type: 'max_rl': groupscale trains GRPO's r - group mean"),
        ("orchestrator.algo.length_penalty={type: linear}", r"orchestrator.algo.length_penalty: .*scaled by its group's"),
        (
            "orchestrator.train.source.0.curriculum={gates: {zero: {type: advantage_range}}}",
            r"orchestrator.train.source.0.curriculum: .*admission gates",
        ),
        ("trainer.loss.type=ipo", r"trainer.loss.type: 'ipo': trains IPO's mask \(probability moved more than ipo_thr"),
        ("trainer.loss.adv_tau=2", r"trainer.loss.adv_tau: 2: scales every advantage.*--drop trainer.loss.adv_tau"),
        ("orchestrator.train.filter_zero_advantages=true", r"orchestrator.train.filter_zero_advantages: True: drops"),
        (("--trainer.optim.type", "muon"), r"trainer.optim.type: 'muon': groupscale trains AdamW"),
        (
            "orchestrator.train.sampling.max_completion_tokens=None",
            r"max_completion_tokens: None: unset: .*seq_len = 2048.*give orchestrator.train.sampling.max_completion_tokens=N",
        ),
    ],
)
def test_a_setting_that_changes_the_budget_or_the_objective_is_refused_naming_it(override, refused):
    """Each after the drops every file needs (DROPPED, then the override: a key given again is the file's again)."""
    with pytest.raises(Refused, match=refused):
        budget("rl.toml", *(override if isinstance(override, tuple) else (override,)))


def test_one_g_per_sweep_a_source_with_another_g_is_refused_until_it_agrees():
    with pytest.raises(Refused, match=r"^orchestrator.train.source.1.group_size: 8: differs from "
                       r"orchestrator.train.source.0.group_size = 16: a sweep trains one G"):  # fmt: skip
        budget("two_sources.toml")
    agreed = budget("two_sources.toml", "orchestrator.train.source.1.group_size=16")
    assert (agreed.group_size, agreed.samples_per_step, agreed.data) == (16, 256, "alphabet-sort")
    warmer = "orchestrator.train.source.0.sampling={temperature: 0.7}"  # a source's own sampling: it alone trains so
    assert budget("rl.toml", warmer).grpo["temperature"] == 0.7
    with pytest.raises(Refused, match=r"^orchestrator.train.source.0.sampling.temperature: 0.7: differs from "
                       r"orchestrator.train.sampling.temperature = 1.0: a sweep trains one temperature"):  # fmt: skip
        budget("two_sources.toml", "orchestrator.train.source.1.group_size=16", warmer)


def test_the_imported_spec_is_valid_and_its_notes_say_what_was_dropped_and_what_trains_instead():
    spec, notes = spec_from(get_framework("prime-rl"), HERE / "rl.toml", [], model="/models/q", drop=DROPS)
    assert spec["group_sizes"] == [4, 8, 16, 32, 64] and spec["samples_per_step"] == [128] and spec["steps"] == 20
    parsed = SweepSpec.model_validate({**spec, "task": {"name": "arithmetic"}, "model": {"preset": "tiny-llama"}})
    assert (parsed.grpo.advantage, parsed.grpo.loss_aggregation, parsed.grpo.max_new_tokens) == ("mean", "token_mean", 128)
    assert notes[0] == "read rl.toml as prime-rl (PrimeIntellect-ai/prime-rl@559b447, 2026-08)"
    assert [n for n in notes if n.startswith("dropped ")] == [f"dropped {k}: the sweep measures G without it" for k in DROPS]
    assert any(n.startswith("the sweep trains PPO's clipped ratio at groupscale's default clip_eps 0.2") for n in notes)


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("rl.toml", ["group_size = 16 # rollouts per prompt", "group_size = 8 # rollouts per prompt"]),
        ("rl_old_names.toml", ["rollouts_per_example = 16 # G", "rollouts_per_example = 8 # G"]),  # the file's own name
        ("split/orch.toml", ["group_size = 16 # G", "group_size = 8 # G"]),
    ],
)
def test_recommend_config_changes_g_alone_where_the_file_sets_it(file, expected, tmp_path):
    """The round trip: G = 8 back at the file's B = 128 (completions: batch_size stays), comments kept, and the
    edited file reads back as G 8 at the same B and objective."""
    framework, path = get_framework("prime-rl"), HERE / file
    before = file_budget(framework, path, DROPPED)
    text = edit_config(framework, path, 8, dict(before.grpo), before)
    assert changed_lines(path.read_text(), text) == expected
    edited = tmp_path / file
    edited.parent.mkdir(exist_ok=True)
    edited.write_text(text)
    if file.startswith("split/"):
        (edited.parent / "train.toml").write_text((HERE / "split" / "train.toml").read_text())
    after = file_budget(framework, edited, DROPPED)
    assert (after.group_size, after.samples_per_step, after.grpo) == (8, before.samples_per_step, before.grpo)


def test_recommend_config_sets_each_sources_own_g_and_refuses_what_prime_rl_would(tmp_path):
    framework = get_framework("prime-rl")
    path = tmp_path / "rl.toml"
    path.write_text((HERE / "two_sources.toml").read_text().replace("group_size = 8", "group_size = 16"))
    before = file_budget(framework, path, DROPPED)
    text = edit_config(framework, path, 32, dict(before.grpo), before)
    assert changed_lines(path.read_text(), text) == ["group_size = 16 # this source's G", "group_size = 32 # this source's G",
                                                     "group_size = 16", "group_size = 32"]  # fmt: skip
    with pytest.raises(ObjectiveDiffers, match="advantage: the sweep measured loo, the file trains mean"):
        edit_config(framework, path, 32, {**before.grpo, "advantage": "loo"}, before)
    path.write_text((HERE / "rl.toml").read_text() + "\n[orchestrator.concurrency]\nmax_inflight = 16\n")
    with pytest.raises(Refused, match="orchestrator.concurrency.max_inflight: 16: is below G = 32"):
        edit_config(framework, path, 32, dict(before.grpo), file_budget(framework, path, DROPPED))


@pytest.fixture
def prime_rl_export():
    """The export's class; the registry as it was once the test ends (the package's import line registers it)."""
    from sweeps.exports import EXPORTS

    before = dict(EXPORTS)
    from sweeps.exports.prime_rl import PrimeRLExport

    yield PrimeRLExport
    EXPORTS.clear()
    EXPORTS.update(before)


def test_the_prime_rl_export_writes_its_flags_and_refuses_an_objective_it_does_not_train(prime_rl_export):
    from sweeps.exports.base import ExportError

    PrimeRLExport = prime_rl_export

    grpo = GRPOSpec(advantage="mean", loss_aggregation="token_mean", max_new_tokens=128, temperature=0.9)
    text = PrimeRLExport().render(8, 128, Recipe(grpo, 1), "groupscale: G = 8")
    flags = [line for line in text.splitlines() if not line.startswith("#")]
    assert flags == ["--orchestrator.group-size 8", "--orchestrator.batch-size 128",
                     "--orchestrator.train.sampling.temperature 0.9", "--orchestrator.train.sampling.max-completion-tokens 128",
                     "--orchestrator.train.filter-zero-advantages false"]  # fmt: skip
    with pytest.raises(ExportError, match="advantage: 'loo': prime-rl's GRPO advantage is r - group mean"):
        PrimeRLExport().render(8, 128, Recipe(GRPOSpec(), 1), "")
    with pytest.raises(ExportError, match="steps_per_generation: '4'"):
        PrimeRLExport().render(8, 128, Recipe(grpo, 4), "")


def test_spec_from_recognises_prime_rls_files_and_not_the_others():
    files = ["rl.toml", "rl_old_names.toml", "two_sources.toml", "split/orch.toml"]
    assert [recognise(HERE / f).name for f in files] == ["prime-rl"] * len(files)
    assert {recognise(f).name for f in (FIXTURES / "verl").iterdir()} == {"verl"}
    with pytest.raises(ValueError, match="recognised as none"):
        recognise(HERE / "split" / "train.toml")  # the trainer's half holds no G
    with pytest.raises(ValueError, match="no \\[orchestrator\\]"):
        file_budget(get_framework("prime-rl"), HERE / "split" / "train.toml")
