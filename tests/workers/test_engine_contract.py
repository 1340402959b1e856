"""What every engine's trainer promises (workers.engines and its measurement harness), checked on each one with chat-tiny
and a word-problem file: the held-out gap at step 0 and at T, a trial killed anywhere (mid-trial, after its last
checkpoint, inside a generation cycle) resumed from its checkpoint to the uninterrupted trial's parameters and metrics,
a failing reward (a function, a reward server) failing the trial by its name, and an outcome that is a TrialOutcome."""

import re
from pathlib import Path

import pytest
import torch

from sweeps import storage
from sweeps.engines import ENGINES
from sweeps.metrics import SUMMARIZED
from sweeps.trial import TrialOutcome
from tests.ports import free_port
from tests.reward_server import running
from tests.workers.test_trl_engine import RECIPE, Recorder, _config, _run, chat  # noqa: F401 - chat: the fixture
from workers.checkpoint import load_checkpoint

ENGINE_SETTINGS = {"groupscale": {"engine": "groupscale", "trl": {}, "lr": 3e-4}, "trl": {"engine": "trl", "trl": RECIPE}}
BROKEN = "def broken(completions, **kwargs):\n    raise RuntimeError('the grader is down')\n"


@pytest.fixture(params=list(ENGINES))
def engine(request):
    return request.param


def _trial(chat, folder: Path, engine: str, **over):  # noqa: F811 - chat: the fixture
    return _config(chat, folder, **{**ENGINE_SETTINGS[engine], **over})


class KilledAt(Recorder):
    """Dies at the first point of step ``die_at`` (with ``key``: the first that holds it), as a killed worker would."""

    def __init__(self, die_at: int, key: str | None = None) -> None:
        super().__init__(die_at)
        self.key = key

    def __call__(self, metrics, step):
        if step == self.die_at and (self.key is None or self.key in metrics):
            raise KeyboardInterrupt
        self.steps.setdefault(step, {}).update(metrics)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_gap_at_step_0_and_t_and_a_killed_trial_resumes_to_the_same_result(chat, tmp_path, engine, where, request):  # noqa: F811
    """Killed at step 3 with a checkpoint at step 2, the trial resumes to the gap it reaches straight. On the S3 server
    (GROUPSCALE_STORAGE_URI s3://...) the resume runs with another cache folder, as on another node whose disk has no
    copy of the checkpoint: it reads the server's."""
    report = Recorder()
    straight = _run(_trial(chat, tmp_path / "a", engine), report)
    assert straight.status is TrialOutcome.SUCCEEDED, straight
    assert "gap" in report.steps[0] and "gap" in report.steps[4], sorted(report.steps)
    assert straight.metrics["gap"] == pytest.approx(report.steps[4]["gap"])
    folder = request.getfixturevalue("s3_bucket") + "/checkpoints/t1" if where == "s3" else str(tmp_path / "ckpt")
    killed = _trial(chat, tmp_path / "b", engine, checkpoint_every=2, checkpoint_dir=folder)
    assert isinstance(_run(killed, KilledAt(die_at=3)), KeyboardInterrupt)
    assert storage.listing(folder), "nothing was checkpointed where the trial keeps its checkpoints"
    elsewhere = tmp_path / ("c" if where == "s3" else "b")  # on S3: a cache folder without the local copy
    resumed_report = Recorder()
    resumed = _run(_trial(chat, elsewhere, engine, checkpoint_every=2, checkpoint_dir=folder), resumed_report)
    assert resumed.status is TrialOutcome.SUCCEEDED, resumed
    assert min(resumed_report.steps) == 2, sorted(resumed_report.steps)  # from the checkpoint, not from step 0
    assert resumed.metrics["gap"] == pytest.approx(straight.metrics["gap"], abs=1e-9), (resumed.metrics, straight.metrics)
    summary = {k: straight.metrics[k] for k in SUMMARIZED}  # the realized G and the no-signal causes over all 4 steps
    assert {k: resumed.metrics[k] for k in SUMMARIZED} == pytest.approx(summary, abs=1e-9)


STEP_KEY = {"groupscale": "time_update_s", "trl": "loss"}  # a metric each engine reports at every step it trains
# one generation feeds two optimizer steps' worth of updates: TRL's num_iterations, groupscale's inner_steps (mu = 2)
REUSED = {"groupscale": {"inner_steps": 2}, "trl": {"trl": {**RECIPE, "num_iterations": 2}}}
CYCLE = {"groupscale": 1, "trl": 2}  # optimizer steps of one generation cycle under REUSED


def _parameters(engine: str, folder: Path) -> dict:
    """The trainable parameters in the trial's checkpoint at T."""
    if engine == "groupscale":
        return load_checkpoint(str(folder))["model"]
    from safetensors.torch import load_file

    return load_file(str(folder / "checkpoint-4" / "model.safetensors"))


@pytest.mark.parametrize("kill", ["after the last checkpoint", "inside a generation cycle"])
def test_a_trial_killed_after_its_last_checkpoint_or_inside_a_generation_cycle_resumes_to_the_same_end(
    chat,  # noqa: F811 - the fixture
    tmp_path,
    engine,
    kill,
):
    """Killed once its checkpoint at T exists (in the final eval), the trial evaluates and ends without training a step
    (TRL trained step T + 1); killed at step 4 of a run whose generations feed two steps, it resumes from the last
    checkpoint where a cycle ends (TRL checkpointed inside a cycle and generated again on resume). Either way it ends
    with the uninterrupted trial's parameters and metrics, each generation counted once."""
    after = kill == "after the last checkpoint"
    over = {"checkpoint_every": 1, **({} if after else REUSED[engine])}
    straight = _run(_trial(chat, tmp_path / "a", engine, checkpoint_dir=str(tmp_path / "straight"), **over), Recorder())
    assert straight.status is TrialOutcome.SUCCEEDED, straight
    killed = _trial(chat, tmp_path / "b", engine, checkpoint_dir=str(tmp_path / "killed"), **over)
    assert isinstance(_run(killed, KilledAt(4, "gap" if after else STEP_KEY[engine])), KeyboardInterrupt)
    report = Recorder()
    resumed = _run(killed, report)
    assert resumed.status is TrialOutcome.SUCCEEDED, resumed
    start = 4 if after else 4 - CYCLE[engine]  # the checkpoint it resumed from: at T, or where the last cycle ended
    assert report.steps[start]["resumed_from_step"] == start, report.steps
    assert sorted(s for s, m in report.steps.items() if STEP_KEY[engine] in m) == list(range(start + 1, 5))
    assert resumed.metrics == pytest.approx(straight.metrics, abs=1e-9), (resumed.metrics, straight.metrics)
    ours, theirs = _parameters(engine, tmp_path / "killed"), _parameters(engine, tmp_path / "straight")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_a_failing_reward_fails_the_trial_naming_the_term(chat, tmp_path, engine):  # noqa: F811
    (tmp_path / "broken.py").write_text(BROKEN)
    task = {"name": "dataset", "path": str(chat[1]), "rewards": [{"function": f"{tmp_path / 'broken.py'}:broken"}]}
    result = _run(_trial(chat, tmp_path / "a", engine, task=task), Recorder())
    assert result.status is TrialOutcome.FAILED and "broken" in result.reason and "the grader is down" in result.reason, result


@pytest.fixture(scope="module")
def reward_server():
    with running(free_port()) as base:
        yield base


@pytest.mark.parametrize(
    "path, entry, cause",
    [
        ("status/500", {"retries": 1}, r"failed after 2 requests: HTTP 500"),
        ("slow", {"retries": 1, "timeout_s": 0.3}, r"failed after 2 requests: no answer within 0\.3 s"),
        ("short", {"retries": 1}, r"failed after 2 requests: the reply has 11 scores for 12 completions"),  # held-out
        ("nan", {"retries": 1}, r"failed after 2 requests: the reply has a value that is not a finite number"),
    ],
)
def test_a_failing_reward_server_fails_the_trial_naming_its_url(chat, tmp_path, engine, reward_server, path, entry, cause):  # noqa: F811
    """A reward server that fails (tests/reward_server.py, a process) fails the trial after its retries: nothing
    trains on a default reward."""
    url = f"{reward_server}/{path}"
    task = {"name": "dataset", "path": str(chat[1]), "rewards": [{"url": url, **entry}]}
    result = _run(_trial(chat, tmp_path / "a", engine, task=task), Recorder())
    assert result.status is TrialOutcome.FAILED, result
    assert re.search(f"the reward server {re.escape(url)} {cause}", result.reason), result.reason
