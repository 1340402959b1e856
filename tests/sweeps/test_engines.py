"""The engine registry on the controller's side (sweeps.engines): names, errors, and what each engine says of a spec."""

import pytest

from sweeps.engines import ENGINES, get_engine
from sweeps.planner import plan_trials
from sweeps.spec import SweepSpec
from tests.factories import spec


def test_an_unknown_engine_names_the_valid_ones_and_the_spec_allows_exactly_the_registry():
    with pytest.raises(ValueError, match=r"unknown engine 'verl'; valid: groupscale, trl"):
        get_engine("verl")
    assert SweepSpec.model_json_schema()["properties"]["engine"]["enum"] == list(ENGINES) == ["groupscale", "trl"]
    with pytest.raises(ValueError, match=r"unknown engine 'verl'; valid: groupscale, trl"):
        SweepSpec.model_validate(spec(engine="verl"))
    assert {name: engine.name for name, engine in ENGINES.items()} == {name: name for name in ENGINES}


def test_each_engine_says_what_its_trials_log_and_how_b_is_split():
    ours = SweepSpec.model_validate(spec(grpo={"lr": 0.01, "clip_eps": 0.3}, samples_per_step=[16]))
    trl = SweepSpec.model_validate(
        spec(engine="trl", samples_per_step=[16], trl={"steps_per_generation": 4, "gradient_accumulation_steps": 2})
    )
    groupscale, recipe = get_engine("groupscale"), get_engine("trl")
    assert groupscale.run_params(ours)["grpo.clip_eps"] == 0.3 and recipe.run_params(trl) == {}
    assert groupscale.step_structure(ours) is None
    assert recipe.step_structure(trl) == [
        "each generation of 16 completions feeds 2 optimizer step(s) of 8 (per_device_train_batch_size 8 x 1 process(es) "
        "x gradient_accumulation_steps 1, steps_per_generation 2)"
    ]
    assert groupscale.trial_grpo(ours, 0.5).lr == 0.5 and groupscale.trial_grpo(ours, None).lr == 0.01
    assert (recipe.trial_grpo(trl, None).max_new_tokens, recipe.trial_grpo(trl, None).temperature) == (512, 1.0)
    # what a step samples: groupscale one generation of B; TRL's 2 steps per generation of 16: 5 steps take 3
    assert groupscale.sampled(ours, 5, 16) == 80 and recipe.sampled(trl, 5, 16) == 48
    assert groupscale.adds_lora and not recipe.adds_lora
    assert groupscale.cluster_check is None and recipe.cluster_check == "workers.entry:check_trl_task"
    assert plan_trials(trl)  # the spec plans as before


def test_the_trl_engine_reads_the_recipe_with_the_installed_trl():
    pytest.importorskip("trl")
    bad = SweepSpec.model_validate(spec(engine="trl", samples_per_step=[16], trl={"learnig_rate": 1e-6}))
    with pytest.raises(ValueError, match=r"^trl.learnig_rate: not a field of TRL's GRPOConfig \(did you mean learning_rate"):
        get_engine("trl").check_here(bad)
    get_engine("groupscale").check_here(SweepSpec.model_validate(spec()))  # nothing to read


def test_every_engine_has_a_trainer_and_an_outcome_is_one_of_three():
    from sweeps.trial import TrialOutcome, TrialResult
    from workers.measures import trainer

    assert trainer("trl").__name__ == "train_trial_trl" and trainer("groupscale").__module__ == "workers.engines.groupscale"
    with pytest.raises(ValueError, match=r"unknown engine 'verl'; valid: groupscale, trl"):
        trainer("verl")
    assert TrialResult("no_signal").status is TrialOutcome.NO_SIGNAL
    with pytest.raises(ValueError, match=r"unknown trial outcome 'done'; valid: succeeded, failed, no_signal"):
        TrialResult("done")


def test_a_name_registered_twice_is_refused_and_each_engine_gives_its_recipe():
    from fractions import Fraction

    from sweeps.engines import Engine, register_engine

    class Twin(Engine):
        name = "trl"
        trainer = "workers.engines.trl:train_trial_trl"

    with pytest.raises(ValueError, match=r"engine 'trl' is registered twice \(TrlEngine, Twin\)"):
        register_engine(Twin)
    assert type(ENGINES["trl"]).__name__ == "TrlEngine"  # the first declaration stays
    ours = SweepSpec.model_validate(spec(grpo={"clip_eps": 0.3}))
    assert get_engine("groupscale").recipe(ours).grpo.clip_eps == 0.3
    assert get_engine("groupscale").recipe(ours).optimizer_steps_per_generation == 1
    recipe = {"loss_type": "grpo", "beta": "0.04", "steps_per_generation": 4, "gradient_accumulation_steps": 2}
    trl = get_engine("trl").recipe(SweepSpec.model_validate(spec(engine="trl", samples_per_step=[16], trl=recipe)))
    assert (trl.grpo.loss_aggregation, trl.grpo.kl_beta, trl.grpo.advantage) == ("seq_mean_token_mean", 0.04, "mean_std")
    assert trl.optimizer_steps_per_generation == Fraction(2) and trl.trl == recipe  # the recipe as written


def test_a_section_of_another_engine_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"trl: holds GRPOConfig fields for engine trl; set engine: trl"):
        SweepSpec.model_validate(spec(trl={"beta": 0.0}))
