import json
import signal

import pytest
from typer.testing import CliRunner

from service.cli import app
from tests.factories import spec

runner = CliRunner()


def write_csv(path, f, grid, budget=48, seeds=(0, 1), y="gap"):
    lines = [f"group_size,samples_per_step,seed,{y}"]
    lines += [f"{g},{budget},{s},{f(g):.8f}" for g in grid for s in seeds]
    path.write_text("\n".join(lines) + "\n")
    return path


def law(*args):
    return runner.invoke(app, ["law", "fit", *map(str, args)])


def test_law_fit_json_recovers_g_star(tmp_path):
    p = write_csv(tmp_path / "r.csv", lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), [2, 3, 4, 6, 8, 12, 16])
    r = law(p, "--y", "gap", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["status"] == "ok" and abs(d["g_star"] - 4) < 0.1 and d["recommended_group_size"] == 4
    assert {"g_star_ci95", "per_budget", "universality", "message"} <= set(d)


@pytest.mark.parametrize(
    "grid, f, status",
    [
        ([2, 3, 4, 6, 8, 12, 16], lambda g: 0.2 + 0.09 / (g - 1), "boundary"),
        ([2, 8], lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), "insufficient_data"),
        ([2, 3, 4, 8], lambda g: 0.5, "no_signal"),
    ],
)
def test_law_fit_typed_statuses(tmp_path, grid, f, status):
    r = law(write_csv(tmp_path / "r.csv", f, grid), "--y", "gap", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == status


def test_law_fit_bad_input_exits_2_naming_the_column(tmp_path):
    p = write_csv(tmp_path / "r.csv", lambda g: 0.2, [2, 4], y="loss")
    r = law(p, "--y", "gap")
    assert r.exit_code == 2 and "gap" in r.output
    assert law(tmp_path / "missing.csv", "--y", "gap").exit_code == 2


def test_submit_invalid_spec_exits_2_before_any_request(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("name: x\ntask: {name: arithmetic}\nmodel: {preset: tiny-llama}\ngroup_sizes: [3]\nsamples_per_step: [64]\n")
    r = runner.invoke(app, ["submit", str(p), "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "group_sizes" in r.output and "2, 4, 8, 16, 32, 64" in r.output


def test_client_commands_without_a_server_exit_1():
    r = runner.invoke(app, ["status", "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 1 and "cannot reach the controller" in r.output


def test_law_fit_text_in_the_metric_is_bad_input(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("group_size,samples_per_step,seed,gap\n2,48,0,0.5\n4,48,0,abc\n")
    r = law(p, "--y", "gap")
    assert r.exit_code == 2 and "r.csv:3" in r.output


def test_law_fit_overflowing_values_fail_cleanly(tmp_path):
    p = write_csv(tmp_path / "r.csv", lambda g: 1e308 if g % 2 else -1e308, [2, 3, 4, 6, 8])
    r = law(p, "--y", "gap", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "fit_failed"


def test_duplicate_yaml_keys_are_refused(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("name: a\nname: b\n")
    r = runner.invoke(app, ["submit", str(p), "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2 and "duplicate key 'name'" in r.output


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\ntask: {name: arithmetic\nmodel: {preset: tiny-llama}\n")
    r = runner.invoke(app, ["submit", str(p), "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2, r.output
    message = " ".join(r.output.split())  # rich wraps long lines
    assert f'in "{p}", line 3' in message and "<unicode string>" not in message, r.output


@pytest.mark.parametrize(
    "typed, hint", [("arithmetc", "did you mean arithmetic?"), ("bandt", "did you mean bandit?"), ("zzz", "")]
)
def test_an_unknown_task_name_suggests_the_closest_and_lists_the_allowed(tmp_path, typed, hint):
    p = tmp_path / "s.yaml"
    p.write_text(json.dumps(spec(task={"name": typed})))
    r = runner.invoke(app, ["submit", str(p), "--url", "http://127.0.0.1:9"])
    message = " ".join(r.output.split())
    assert r.exit_code == 2 and f"task: unknown name '{typed}'" in message, r.output
    assert hint in message and "allowed: arithmetic, bandit, jsonl, dataset" in message
    if not hint:
        assert "did you mean" not in message


def test_up_refuses_one_database_for_the_store_and_mlflow_before_starting_anything(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    monkeypatch.setenv("GROUPSCALE_DATABASE_URL", url)
    monkeypatch.setenv("GROUPSCALE_MLFLOW_BACKEND_URI", f"sqlite:///{tmp_path / 'x' / '..' / 'shared.db'}")  # the same file
    result = runner.invoke(app, ["up", "--data-dir", str(tmp_path / "data"), "--port", "1", "--mlflow-port", "1"])
    assert result.exit_code == 2, result.output
    assert "the same database" in result.output and "GROUPSCALE_MLFLOW_BACKEND_URI" in result.output
    assert not (tmp_path / "shared.db").exists()  # refused before anything (MLflow, Optuna, the store) wrote it


def test_same_database_compares_what_the_urls_name():
    from service.stack import same_database

    assert same_database("postgresql+psycopg://u@db/gs", "postgresql://v:pw@db:5432/gs")
    assert not same_database("postgresql://db/gs", "postgresql://db/mlflow")
    assert not same_database("postgresql://db/gs", "sqlite:///gs")


def test_law_fit_refuses_a_repeated_trial_naming_its_rows(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("group_size,samples_per_step,seed,gap\n2,48,0,0.5\n4,48,0,0.4\n2,48,0,0.6\n2,48,1,0.5\n")
    r = law(p, "--y", "gap")
    assert r.exit_code == 2 and "G=2 B=48 seed=0 on rows 2, 4" in " ".join(r.output.split())


def test_law_fit_refuses_a_group_size_that_is_not_whole(tmp_path):
    p = write_csv(tmp_path / "r.csv", lambda g: 0.2 + 0.01 * g + 0.09 / (g - 1), [2, 3, 4, 6, 8, 12, 16])
    p.write_text(p.read_text().replace("\n2,48,", "\n2.5,48,"))  # never truncated to 2
    r = law(p, "--y", "gap")
    assert r.exit_code == 2 and "group_size must be a whole number, got '2.5'" in r.output


@pytest.mark.parametrize(
    "env, args, why",
    [
        ({"GROUPSCALE_URL": "http://[::1"}, [], "Invalid port"),  # httpx's own message
        ({}, ["--url", "notaurl"], "'notaurl' must start with http:// or https:// and name a host"),
        ({}, ["--url", "ftp://127.0.0.1:8000"], "'ftp://127.0.0.1:8000' must start with http:// or https://"),
    ],
)
def test_a_malformed_controller_url_is_bad_input_not_a_traceback(env, args, why):
    """Exit 2 naming the option and why, not "cannot reach the controller" (exit 1) with advice to start one."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "service", "trials", "abc", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert r.returncode == 2 and "--url / GROUPSCALE_URL is not a valid URL" in r.stderr and why in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "cannot reach" not in r.stderr


def test_law_fit_with_no_evidence_recommends_no_g_anywhere(tmp_path):
    rng = __import__("numpy").random.default_rng(0)
    p = write_csv(tmp_path / "r.csv", lambda g: 0.5 + 0.05 * rng.standard_normal(), [2, 3, 4, 6, 8, 12, 16])
    r = law(p, "--y", "gap")
    assert r.exit_code == 0, r.output
    assert "evidence: none" in r.output and "recommended G = -" in r.output
    table_rows = [line for line in r.output.splitlines() if line.startswith("│ 48")]
    assert table_rows and all(line.rstrip("│ ").endswith("-") for line in table_rows), r.output


def test_probe_local_runs_here_without_a_server(tmp_path, monkeypatch):
    """`probe --local` needs no controller (GROUPSCALE_URL points at nothing): the bandit example's estimates
    are within 10% of its exact components (THEORY.md's check instance)."""
    from pathlib import Path

    from service.settings import get_settings

    monkeypatch.setenv("GROUPSCALE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GROUPSCALE_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    example = Path(__file__).resolve().parents[2] / "sweeps/examples/bandit-law.yaml"
    try:
        r = runner.invoke(app, ["probe", str(example), "--local", "--json"])
    finally:
        get_settings.cache_clear()
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["samples"] == 256 * 16
    for key in ("tau2", "sigma2", "kappa", "g_star"):
        assert result[key] == pytest.approx(result["exact"][key], rel=0.10)


def test_demo_with_a_bad_spec_exits_2_naming_the_field_before_starting_anything(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(spec(task={"name": "bandit"}, model={"preset": "tabular"}, group_sizes=[2, 3])))
    r = runner.invoke(app, ["demo", "--spec", str(bad), "--data-dir", str(tmp_path / "data")])
    assert r.exit_code == 2 and "valid group sizes for B=16: 2, 4, 8, 16" in r.output
    assert "  group_sizes: group size(s) 3 do not divide" in r.output and "Value error" not in r.output, r.output
    assert not (tmp_path / "data").exists()  # no stack was started


def test_spec_from_trl_reads_the_processes_from_an_accelerate_config(tmp_path):
    import yaml

    recipe = tmp_path / "grpo.yaml"
    recipe.write_text("model_name_or_path: /m\nper_device_train_batch_size: 16\nlearning_rate: 1e-6\nnum_generations: 16\n")
    (tmp_path / "acc.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 8\n")
    r = runner.invoke(
        app, ["spec", "from-trl", str(recipe), "--group-sizes", "8,16", "--accelerate-config", str(tmp_path / "acc.yaml")]
    )
    assert r.exit_code == 0, r.output
    spec = yaml.safe_load(r.stdout)
    assert (
        spec["engine"] == "trl"
        and spec["samples_per_step"] == [128]
        and spec["trl"] == {"per_device_train_batch_size": 16, "learning_rate": 1e-6}  # YAML 1.2 reads 1e-6 as a number
    )
    r = runner.invoke(
        app, ["spec", "from-trl", str(recipe), "--group-sizes", "8", "--engine", "groupscale", "--num-processes", "2"]
    )
    assert (
        r.exit_code == 0
        and yaml.safe_load(r.stdout)["grpo"]["lr"] == 1e-6
        and yaml.safe_load(r.stdout)["samples_per_step"] == [32]
    )
    both = ["--num-processes", "2", "--accelerate-config", str(tmp_path / "acc.yaml")]
    r = runner.invoke(app, ["spec", "from-trl", str(recipe), "--group-sizes", "8", *both])
    assert r.exit_code == 2 and "give one of them" in r.output
    assert yaml.safe_load(
        runner.invoke(app, ["spec", "from-trl", str(recipe), "--group-sizes", "8", "--num-processes", "2"]).stdout
    )["resources"] == {"num_processes": 2}  # each trial trains on the recipe's processes
    (tmp_path / "fsdp.yaml").write_text("distributed_type: FSDP\nnum_processes: 2\n")
    r = runner.invoke(
        app, ["spec", "from-trl", str(recipe), "--group-sizes", "8", "--accelerate-config", str(tmp_path / "fsdp.yaml")]
    )
    assert (
        r.exit_code == 0 and "not applied: --accelerate-config distributed_type FSDP; each trial's processes run DDP" in r.stderr
    )
    for processes, says in (("513", "allowed: 1 to 512"), ("4", "give fewer groups than the 4 processes at B = 64")):
        r = runner.invoke(app, ["spec", "from-trl", str(recipe), "--group-sizes", "8,32", "--num-processes", processes])
        assert r.exit_code == 2 and says in r.output, r.output  # the spec it would print could not be submitted


def test_law_fit_gives_a_kinked_tables_best_g_with_evidence_empirical(tmp_path):
    # G = 4 lowest at every seed by 0.04; the law's smooth shape cannot follow the kink, so it does not beat a constant
    kink = {2: 0.70, 3: 0.66, 4: 0.62, 6: 0.67, 8: 0.66, 12: 0.70, 16: 0.66}
    lines = ["group_size,samples_per_step,seed,gap"]
    lines += [f"{g},48,{s},{m + 0.002 * ((s * 7 + g) % 3 - 1):.6f}" for g, m in kink.items() for s in range(3)]
    p = tmp_path / "kink.csv"
    p.write_text("\n".join(lines) + "\n")
    d = json.loads(law(p, "--y", "gap", "--json").stdout)
    assert d["evidence"] == "empirical" and d["recommended_group_size"] == 4 and d["comparison"]["significant"]
    text = law(p, "--y", "gap")
    assert text.exit_code == 0 and "use G = 4, empirical evidence" in " ".join(text.stdout.split())


def test_spec_from_trl_reads_yaml_numbers_as_trl_means_them_or_refuses_naming_the_key(tmp_path):
    """Through the installed command: a recipe's `learning_rate: 1e-6` is the number 1e-6 under trl: (it was kept as the
    text "1e-6"), and `seed: 010` (8 to TRL's PyYAML, 10 to YAML 1.2) is exit 2 naming the key and the line."""
    import os
    import subprocess
    import sys

    import yaml

    recipe = tmp_path / "grpo.yaml"
    recipe.write_text("model_name_or_path: /m\nper_device_train_batch_size: 16\nlearning_rate: 1e-6\nnum_generations: 16\n")
    cmd = [sys.executable, "-m", "service", "spec", "from-trl", str(recipe), "--group-sizes", "8,16"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, timeout=120)
    assert r.returncode == 0, r.stderr
    trl = yaml.safe_load(r.stdout)["trl"]
    assert trl["learning_rate"] == 1e-6 and isinstance(trl["learning_rate"], float)
    recipe.write_text("model_name_or_path: /m\nper_device_train_batch_size: 16\nseed: 010\nuse_vllm: no\n")
    r = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, timeout=120)
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "seed (line 3): 010 is 8 to YAML 1.1 (PyYAML, TRL) but 10 to YAML 1.2" in said, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_law_fit_reads_a_tables_numbers_as_written(tmp_path):
    """A CSV has no YAML 1.1: `064` is 64 and `010` is 10, never octal, and `1e-6` is a number (read_results)."""
    from service.cli.offline import read_results

    p = tmp_path / "r.csv"
    p.write_text("group_size,samples_per_step,seed,gap\n08,064,010,1e-6\n016,064,010,2.5E-3\n")
    assert read_results(p, "gap") == ([8, 16], [64, 64], [10, 10], [1e-6, 2.5e-3])


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["recommend", "--task", "a", "--model", "b", "--samples-per-step", "1"],
            "error: Invalid value for '--samples-per-step': Input should be greater than or equal to 2 "
            "(see groupscale recommend --help)",
        ),
        (["law", "fit", "r.csv"], "error: Missing option '--y'. (see groupscale law fit --help)"),
        (["frobnicate"], "error: No such command 'frobnicate'. (see groupscale --help)"),
        (["--bogus"], "error: No such option: --bogus (see groupscale --help)"),
    ],
)
def test_a_bad_option_or_command_is_one_line_and_exit_2(argv, line):
    r = runner.invoke(app, argv, prog_name="groupscale")
    assert r.exit_code == 2 and r.stderr.splitlines() == [line], r.output


def test_a_group_called_alone_still_shows_its_help():
    r = runner.invoke(app, ["law"], prog_name="groupscale")
    assert r.exit_code == 2 and "fit" in r.output and "Usage: groupscale law" in " ".join(r.output.split())


def test_up_with_a_data_dir_that_cannot_be_made_is_one_line_naming_the_option(tmp_path):
    """It was a 36-line traceback (NotADirectoryError); nothing is started."""
    import os
    import subprocess
    import sys

    (tmp_path / "afile").write_text("x")
    cmd = [
        sys.executable,
        "-m",
        "service",
        "up",
        "--data-dir",
        str(tmp_path / "afile" / "x"),
        "--port",
        "9",
        "--mlflow-port",
        "9",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, timeout=120)
    assert r.returncode == 2 and r.stderr.splitlines() == [f"error: --data-dir {tmp_path / 'afile' / 'x'}: Not a directory"], (
        r.stderr
    )


def test_up_refuses_a_blank_token_before_starting_anything(tmp_path):
    """An empty secret file must not open the API: the server strips the token as the client does, and blank is exit 2."""
    import os
    import subprocess
    import sys

    from service.settings import Settings

    assert Settings(api_token="tok-1\n").api_token == "tok-1"
    env = {**os.environ, "GROUPSCALE_API_TOKEN": " \n"}
    cmd = [sys.executable, "-m", "service", "up", "--data-dir", str(tmp_path / "d"), "--port", "9", "--mlflow-port", "9"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "error: GROUPSCALE_API_TOKEN: set but blank; set the token (e.g. `openssl rand -hex 32`) or unset it"
    ], r.stderr
    assert not (tmp_path / "d" / "mlflow.db").exists()


def test_probe_local_says_what_it_builds_before_the_probe(tmp_path):
    """Through the installed command, with a fresh data dir: the preset's warm start is a stage of its own, named
    with where it is cached, then the probe (the same reports as on the controller: workers.progress)."""
    import os
    import subprocess
    import sys

    path = tmp_path / "probe.yaml"
    over = {"task": {"name": "arithmetic", "max_operand": 11}, "probe": {"prompts": 16, "completions": 4}}
    path.write_text(json.dumps(spec(**over)))
    env = {**os.environ, "GROUPSCALE_DATA_DIR": str(tmp_path / "data")}
    r = subprocess.run(
        [sys.executable, "-m", "service", "probe", str(path), "--local"], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr
    cache = (tmp_path / "data" / "models").resolve()
    assert [line for line in r.stderr.splitlines() if line.startswith(("model: ", "probe: "))] == [
        f"model: building the preset tiny-llama, a supervised warm start: once, then cached in {cache}",
        "probe: 16 prompts x 4 completions (64 samples)",
    ], r.stderr
    assert "Writing model shards" not in r.stderr  # transformers' own bar does not cut into the stage display


def test_spec_from_recognises_the_trainer_and_prints_the_files_own_budget(tmp_path):
    """`spec from FILE`: the trainer named on stderr, the spec on stdout (B in completions, k and the objective)."""
    import yaml

    from tests.sweeps.test_frameworks import FIXTURES

    r = runner.invoke(app, ["spec", "from", str(FIXTURES / "verl" / "run_gspo.sh"), "--group-sizes", "8,16"])
    assert r.exit_code == 0, r.output
    spec = yaml.safe_load(r.stdout)
    assert (spec["group_sizes"], spec["samples_per_step"], spec["grpo"]["steps_per_generation"]) == ([8, 16], [8192], 4)
    assert spec["grpo"]["importance_sampling_level"] == "sequence" and spec["engine"] == "groupscale"
    assert "recognised" in r.stderr and "as verl's (spec from-verl)" in r.stderr and "fill in task.path" in r.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["from-trl", "verl/ppo_trainer.yaml", "--group-sizes", "2"],
            "is verl's config or run script, not a TRL recipe: use spec from-verl",
        ),
        (["from-trl", "openrlhf/train_dapo.sh", "--group-sizes", "2"], "use spec from-openrlhf"),
        (["from-verl", "verl/run_gspo.sh", "--group-sizes", "3"], "--group-sizes: [3] do not give whole groups"),
        (["from-verl", "verl/run_gspo.sh", "--engine", "trl"], "--engine: 'trl'; allowed: groupscale"),
        (["from-verl", "verl/run_gspo.sh", "data.train_batch_size"], "override 'data.train_batch_size' is not key=value"),
        (["from-verl", "verl/run_gspo.sh", "algorithm.adv_estimator=gae"], "algorithm.adv_estimator: 'gae'"),
        (["from-openrlhf", "openrlhf/train_dapo.sh"], "--drop algo.dynamic_filtering_enable measures G without it"),
        (["from", "missing.sh"], "cannot read"),
    ],
)
def test_an_import_that_cannot_keep_the_file_exits_2_naming_why(args, says):
    from tests.sweeps.test_frameworks import FIXTURES

    command, file, *rest = args
    r = runner.invoke(app, ["spec", command, str(FIXTURES / file), *rest])
    assert r.exit_code == 2 and says in r.stderr.replace("\n", " "), r.output
    assert r.stdout == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["verl/run_gspo.sh", "actor_rollout_ref.rollout.n=null"], "actor_rollout_ref.rollout.n: None: must be a number >= 1"),
        (["verl/run_gspo.sh", "data.train_batch_size=0"], "data.train_batch_size: 0: must be a number >= 1"),
        (
            ["verl/run_gspo.sh", "actor_rollout_ref.rollout.n=1e9"],
            "G (completions per prompt): 1000000000: groupscale trains 2 to 4096",
        ),
        (
            ["verl/run_gspo.sh", "--drop", "actor_rollout_ref.rollout.n"],
            "actor_rollout_ref.rollout.n: None: must be a number >= 1",
        ),
        (["verl/run_gspo.sh", "--group-sizes", "8,8"], "group_sizes: group_sizes has repeated values"),
        (["verl/run_gspo.sh", "actor_rollout_ref.actor.optim.lr=0"], "grpo.lr: Input should be greater than 0"),
        (["verl/run_grpo_8b.sh", "DEVICE=tpu"], "the script exits (exit 1) before its launch command"),
        (
            ["verl/ppo_trainer.yaml", "actor_rollout_ref.rollout.n=abc"],
            "actor_rollout_ref.rollout.n: 'abc': is not a whole number",
        ),
    ],
)
def test_bad_values_in_a_trainers_file_exit_2_naming_the_setting_never_a_traceback(args, says):
    """Found by a new user: null or zero batches, absurd G and a dropped budget key were tracebacks or a hang; a
    repeated G or lr 0 printed a spec that submit refuses; a script's exit was run past."""
    from tests.sweeps.test_frameworks import FIXTURES

    r = runner.invoke(app, ["spec", "from-verl", str(FIXTURES / args[0]), *args[1:]])
    assert r.exit_code == 2 and says in r.stderr.replace("\n", " "), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_a_file_of_another_shape_is_not_read_with_a_trainers_defaults(tmp_path):
    """from-nemo-rl and from-skyrl printed their defaults' spec for any mapping; spec from on a TRL recipe names from-trl."""
    other = tmp_path / "other.yaml"
    other.write_text("foo: 1\n")
    for name, title in (("nemo-rl", "NeMo-RL"), ("skyrl", "SkyRL"), ("openrlhf", "OpenRLHF")):
        r = runner.invoke(app, ["spec", f"from-{name}", str(other)])
        assert r.exit_code == 2 and f"not {title}'s config or run script" in r.stderr, (name, r.output)
    recipe = tmp_path / "grpo.yaml"
    recipe.write_text("model_name_or_path: m\nnum_generations: 8\n")
    r = runner.invoke(app, ["spec", "from", str(recipe)])
    assert r.exit_code == 2 and "is a TRL recipe (num_generations): use spec from-trl" in r.stderr


def test_a_variable_the_script_never_reads_is_refused_not_ignored():
    """TRAIN_BATCH_SIZ=512 (a typo) changed nothing and exited 0."""
    from tests.sweeps.test_frameworks import FIXTURES

    r = runner.invoke(app, ["spec", "from-verl", str(FIXTURES / "verl" / "run_grpo_8b.sh"), "TRAIN_BATCH_SIZ=512"])
    assert r.exit_code == 2 and "TRAIN_BATCH_SIZ: the script uses no such variable" in r.stderr, r.output


def test_up_serves_the_data_dir_that_groupscale_data_dir_names_unless_data_dir_is_given(tmp_path, monkeypatch):
    """`up` ran on .groupscale (its --data-dir default) although GROUPSCALE_DATA_DIR was set, which the docs list."""
    from pathlib import Path

    import service.stack

    served = []
    monkeypatch.setattr(service.stack, "run_stack", lambda host, port, mlflow_port, data_dir: served.append(data_dir))
    monkeypatch.setenv("GROUPSCALE_DATA_DIR", str(tmp_path / "env"))
    assert runner.invoke(app, ["up"]).exit_code == 0
    assert runner.invoke(app, ["up", "--data-dir", str(tmp_path / "option")]).exit_code == 0
    monkeypatch.delenv("GROUPSCALE_DATA_DIR")
    assert runner.invoke(app, ["up"]).exit_code == 0
    assert served == [tmp_path / "env", tmp_path / "option", Path(".groupscale")]


def test_demo_runs_its_stack_on_the_data_dir_that_groupscale_data_dir_names(tmp_path, monkeypatch):
    """`demo` started its `up` on .groupscale although GROUPSCALE_DATA_DIR was set (as `up` did)."""
    import service.stack

    started = []

    def up_command(port, mlflow_port, data_dir):  # noqa: ANN001, ANN202 - what demo starts, recorded; then it stops
        started.append(data_dir)
        raise service.stack.StackError("recorded")

    monkeypatch.setattr(service.stack, "up_command", up_command)
    monkeypatch.setenv("GROUPSCALE_DATA_DIR", str(tmp_path / "env"))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        runner.invoke(app, ["demo"])
    finally:  # demo takes Ctrl-C and SIGTERM for the stack it starts: this process's are set back
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert started == [tmp_path / "env"]
