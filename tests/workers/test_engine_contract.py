"""What every engine's trainer promises (workers.engines), checked on each one with chat-tiny and a word-problem file:
the held-out gap at step 0 and at T, a killed trial resumed from its checkpoint to the same result, a failing reward
failing the trial by its name, and an outcome that is a TrialOutcome."""

from pathlib import Path

import pytest

from sweeps import storage
from sweeps.engines import ENGINES
from sweeps.metrics import SUMMARIZED
from sweeps.trial import TrialOutcome
from tests.workers.test_trl_engine import RECIPE, Recorder, _config, _run, chat  # noqa: F401 - chat: the fixture

ENGINE_SETTINGS = {"groupscale": {"engine": "groupscale", "trl": {}, "lr": 3e-4}, "trl": {"engine": "trl", "trl": RECIPE}}
BROKEN = "def broken(completions, **kwargs):\n    raise RuntimeError('the grader is down')\n"


@pytest.fixture(params=list(ENGINES))
def engine(request):
    return request.param


def _trial(chat, folder: Path, engine: str, **over):  # noqa: F811 - chat: the fixture
    return _config(chat, folder, **{**ENGINE_SETTINGS[engine], **over})


class KilledAt(Recorder):
    """Dies at the first point of step ``die_at`` (whatever metric comes first), as a killed worker would."""

    def __call__(self, metrics, step):
        if step == self.die_at:
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


def test_a_failing_reward_fails_the_trial_naming_the_term(chat, tmp_path, engine):  # noqa: F811
    (tmp_path / "broken.py").write_text(BROKEN)
    task = {"name": "dataset", "path": str(chat[1]), "rewards": [{"function": f"{tmp_path / 'broken.py'}:broken"}]}
    result = _run(_trial(chat, tmp_path / "a", engine, task=task), Recorder())
    assert result.status is TrialOutcome.FAILED and "broken" in result.reason and "the grader is down" in result.reason, result
