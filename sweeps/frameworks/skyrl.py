"""SkyRL (NovaSky-AI/SkyRL): run scripts of ``uv run -m skyrl.train.entrypoints.main_base key=value ...`` (and of
skyrl-train's ``skyrl_train.entrypoints.main_base``, and of an example's own entry module such as ``main_dapo``), a
script that runs another (``bash examples/train/gsm8k/run_gsm8k.sh key=value "$@"``), and the legacy
``ppo_base_config.yaml``, in the budget vocabulary, and back.

Loading (``skyrl/train/config/config.py`` SkyRLTrainConfig.from_cli_overrides, NovaSky-AI/SkyRL@a956457, 2026-08): no
YAML since 36f38c7 (2026-05-17): a run is the dataclasses' defaults and the script's ``key=value`` words. The scripts set
their knobs as ``: "${NUM_GPUS:=4}"`` (read here as ``NUM_GPUS=${NUM_GPUS:-4}``, the same in bash).

Keys and units (config.py and ``skyrl/backends/skyrl_train/utils/ppo_utils.py`` @a956457):
``trainer.train_batch_size`` counts PROMPTS per generation, each sampled ``generator.n_samples_per_prompt`` (G) times:
B = prompts x G; ``trainer.policy_mini_batch_size`` counts prompts, one optimizer step each: k = train_batch_size /
policy_mini_batch_size; ``trainer.update_epochs_per_batch`` is mu. ``trainer.algorithm.loss_reduction`` token_mean (over
the mini-batch), sequence_mean (seq_mean_token_mean), seq_mean_token_sum_norm (by ``algorithm.max_seq_len``, which must
be the completion cap groupscale divides by); ``policy_loss_type`` regular (token ratio) or gspo (sequence ratio); its
``clip_ratio_c`` binds only with dual_clip (refused), so it is not read. Advantages: grpo (r - mean) / (std + 1e-6),
ddof 1, or r - mean without ``grpo_norm_by_std``; rloo (loo). The KL is a loss term by default (k3, 0.001). Before
bf243b8 (2026-03-31) token_mean was a mean of each micro-batch's token mean (today's token_mean_legacy): a
``skyrl_train`` script's token_mean is read as token_mean and said in the notes.

Rewards are skyrl-gym environments (``environment.env_class``, config.py L1308; a row's ``env_class`` column overrides
it, ``skyrl/train/dataset/dataset.py`` L89): gsm8k's reward is ``skyrl-gym/skyrl_gym/envs/gsm8k/utils.py``'s
``compute_score(solution_str, ground_truth)`` on the row's ``reward_spec.ground_truth`` (``env.py`` L16-19,
``examples/train/gsm8k/gsm8k_dataset.py``), verl's convention; the entry is a placeholder naming it where the script
names the environment.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Any

from sweeps.frameworks.base import Budget, Config, Framework, Refused, fill_in, register_framework, whole
from sweeps.frameworks.edits import edit_script, is_script
from sweeps.frameworks.files import config_of, find_near, load_mapping, nested, overrides_config, split_variables
from sweeps.frameworks.shell import ScriptError, logical_lines, read_script

T, AL, GEN = "trainer.", "trainer.algorithm.", "generator."
DEFAULTS = {  # config.py@a956457: the keys budget() reads
    GEN + "n_samples_per_prompt": 5,
    GEN + "sampling_params.temperature": 1.0,
    GEN + "sampling_params.max_generate_length": 1024,
    T + "train_batch_size": 1024,
    T + "policy_mini_batch_size": 256,
    T + "update_epochs_per_batch": 1,
    T + "max_training_steps": None,
    T + "policy.model.path": "Qwen/Qwen2.5-1.5B-Instruct",
    T + "policy.optimizer_config.lr": 1e-6,
    AL + "advantage_estimator": "grpo",
    AL + "grpo_norm_by_std": True,
    AL + "loss_reduction": "token_mean",
    AL + "policy_loss_type": "regular",
    AL + "eps_clip_low": 0.2,
    AL + "eps_clip_high": 0.2,
    AL + "use_kl_loss": True,
    AL + "kl_loss_coef": 0.001,
    AL + "kl_estimator_type": "k3",
    AL + "max_seq_len": None,
    AL + "temperature": None,
}
ENTRY_DEFAULTS = {  # an example's entry module's own dataclass fields: examples/train/algorithms/dapo/main_dapo.py@a956457
    "examples.train.algorithms.dapo.main_dapo": {AL + "overlong_buffer_len": 512, AL + "overlong_buffer_penalty_factor": 1.0}
}
LEGACY = ("skyrl_train.", "examples.algorithms.")  # skyrl-train <= 0.3's modules (its examples/ had no train/ folder)
LOSS_REDUCTION = {"token_mean": "token_mean", "sequence_mean": "seq_mean_token_mean",
                  "seq_mean_token_sum_norm": "seq_mean_token_sum_norm"}  # fmt: skip
POLICY_LOSS = {"regular": "token", "gspo": "sequence"}
ESTIMATORS = {"rloo": "loo"}  # grpo: mean_std or mean (grpo_norm_by_std)
REFUSED = {  # key -> (its off value, why groupscale does not train it)
    T + "fully_async.enabled": (False, "fully asynchronous training trains on completions of older policies; groupscale "
                                "trains on-policy"),
    AL + "dynamic_sampling.type": (None, "dynamic sampling (filter: DAPO's, drops the groups whose rewards are equal and "
                                   "samples again; replace: repeats good groups in their place) makes the prompts that "
                                   "train depend on G, which groupscale's trainer does not do"),
    AL + "zero_variance_filter": (False, "masks the loss of the groups whose rewards are equal, which still count in B"),
    AL + "advantage_batch_normalize": (False, "normalises the advantages over the whole batch, so a group's advantages "
                                       "depend on the other prompts of the step"),
    AL + "use_kl_in_reward": (False, "a KL penalty in the reward is not trained by groupscale; use use_kl_loss"),
    AL + "use_entropy_loss": (False, "an entropy bonus is not trained by groupscale"),
    AL + "use_tis": (False, "truncated importance sampling is not in groupscale's loss"),
    AL + "off_policy_correction.tis_ratio_type": (None, "off-policy importance sampling is not in groupscale's loss"),
    AL + "off_policy_correction.sequence_mask_metric": (None, "masks sequences by their importance ratio"),
    AL + "off_policy_correction.outlier_token_is_threshold_low": (None, "masks sequences by their importance ratio"),
    AL + "off_policy_correction.outlier_token_is_threshold_high": (None, "masks sequences by their importance ratio"),
    AL + "off_policy_correction.token_mask_is_threshold_low": (None, "masks tokens by their importance ratio"),
    AL + "off_policy_correction.token_mask_is_threshold_high": (None, "masks tokens by their importance ratio"),
    AL + "overlong_buffer_len": (None, "main_dapo's soft overlong punishment lowers the rewards of long completions"),
    AL + "overlong_buffer.len": (None, "main_dapo's soft overlong punishment lowers the rewards of long completions"),
    GEN + "apply_overlong_filtering": (False, "masks the loss of truncated completions, which still count in B"),
    GEN + "zero_reward_on_non_stop": (False, "sets the reward of truncated completions to 0"),
    GEN + "max_turns": (1, "multi-turn rollouts are not what groupscale generates (one completion a prompt)"),
}  # fmt: skip
DELEGATE = re.compile(r"^bash$|(?:^|\s)bash\s+\S+\.sh\b")  # a run script that runs another with its words after


def skyrl_budget(config: Config) -> Budget:
    """SkyRL's keys in the vocabulary. Raises Refused."""
    group_size = config.number(GEN + "n_samples_per_prompt", minimum=1)
    if group_size < 2:
        raise Refused(GEN + "n_samples_per_prompt", group_size, "GRPO samples G >= 2 completions per prompt")
    prompts = config.number(T + "train_batch_size", minimum=1)
    for key, (off, why) in REFUSED.items():
        if config.get(key) not in (None, off):
            raise Refused(key, config.get(key), f"{why}; --drop {key} measures G without it")
    estimator = config.get(AL + "advantage_estimator")
    if estimator not in ("grpo", "rloo"):
        raise Refused(AL + "advantage_estimator", estimator, "groupscale trains critic-free group baselines; allowed: grpo, rloo")
    temperature = config.number(GEN + "sampling_params.temperature", kind=float)
    if config.get(AL + "temperature") not in (None, temperature):
        raise Refused(AL + "temperature", config.get(AL + "temperature"), f"scales the logits of the loss otherwise than "
                      f"the sampling temperature {temperature:g}; --drop {AL}temperature takes the sampling one")  # fmt: skip
    mini = config.number(T + "policy_mini_batch_size", minimum=1)
    grpo: dict[str, Any] = {
        "steps_per_generation": whole(T + "policy_mini_batch_size", prompts, mini, "optimizer steps per generation "
                                      "(train_batch_size / policy_mini_batch_size)"),
        "inner_steps": config.number(T + "update_epochs_per_batch", minimum=1),
        "loss_aggregation": _reduction(config),
        "importance_sampling_level": config.named(AL + "policy_loss_type", POLICY_LOSS, "regular"),
        "advantage": ESTIMATORS.get(estimator) or ("mean_std" if config.get(AL + "grpo_norm_by_std", True) else "mean"),
        "clip_eps": config.number(AL + "eps_clip_low", kind=float),
        "clip_eps_high": config.number(AL + "eps_clip_high", kind=float),
        "kl_beta": _kl(config),
        "lr": config.number(T + "policy.optimizer_config.lr", kind=float),
        "temperature": temperature,
        "max_new_tokens": config.number(GEN + "sampling_params.max_generate_length"),
    }  # fmt: skip
    steps = config.number(T + "max_training_steps")
    return Budget(group_size, prompts * group_size, grpo, model=config.text(T + "policy.model.path"),
                  steps=None if steps is None else steps * grpo["steps_per_generation"],
                  data=config.first_file("data.train_data"), rewards=_rewards(config))  # fmt: skip


def _rewards(config: Config) -> list[dict[str, Any]]:
    """The environment the script names as the entry to fill in: gsm8k's scorer, another's to find."""
    env = config.text("environment.env_class") if "environment.env_class" in config.given else None
    if env == "gsm8k":
        return fill_in("skyrl_gym/envs/gsm8k/utils.py:compute_score", convention="verl", answer_column="reward_spec.ground_truth")
    if env is not None:
        config.assumed.append(f"SkyRL scores with its {env} environment (skyrl_gym/envs/), not a file: fill in task.rewards")
    return fill_in(f"SkyRL env {env}'s scorer as rewards.py:NAME") if env else []


def _reduction(config: Config) -> str:
    key = AL + "loss_reduction"
    if config.get(key) == "token_mean_legacy":
        raise Refused(key, "token_mean_legacy", "averages each micro-batch's token mean, not groupscale's token mean over "
                      f"the optimizer step; --drop {key} measures G with token_mean")  # fmt: skip
    aggregation = config.named(key, LOSS_REDUCTION, "token_mean")
    if aggregation == "seq_mean_token_sum_norm":
        cap, norm = config.number(GEN + "sampling_params.max_generate_length"), config.number(AL + "max_seq_len")
        if norm != cap:
            raise Refused(AL + "max_seq_len", norm, f"divides the token sums by another constant than the completion cap "
                          f"{cap}, which groupscale divides by; set it to {cap}")  # fmt: skip
    return aggregation


def _kl(config: Config) -> float:
    beta = config.number(AL + "kl_loss_coef", 0.0, float)
    if config.get(AL + "use_kl_loss") is not True or not beta:
        return 0.0
    if config.get(AL + "kl_estimator_type") != "k3":
        raise Refused(AL + "kl_estimator_type", config.get(AL + "kl_estimator_type"), "groupscale's KL is k3; allowed: k3, "
                      f"or --drop {AL}use_kl_loss measures G without a KL")  # fmt: skip
    return beta


def skyrl_settings(group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
    """SkyRL keys for G at B completions with ``grpo`` (k may be a Fraction 1/n: n generations per optimizer step,
    one SkyRL batch of n B). Raises Refused when SkyRL cannot express it."""
    k = Fraction(grpo.get("steps_per_generation", 1))
    prompts = samples_per_step // group_size * k.denominator
    if (k.numerator != 1 and k.denominator != 1) or prompts % k.numerator:
        raise Refused("steps_per_generation", str(k), f"{prompts} prompts do not split into {k} SkyRL mini-batches of "
                      "whole prompts (policy_mini_batch_size must divide train_batch_size)")  # fmt: skip
    advantage = grpo.get("advantage", "loo")
    if advantage not in ("loo", "mean", "mean_std"):
        raise Refused("advantage", advantage, "SkyRL's estimators are grpo (mean, mean_std) and rloo (loo)")
    aggregation = grpo.get("loss_aggregation", "seq_mean_token_mean")
    kl = grpo.get("kl_beta", 0.0)
    out = {
        GEN + "n_samples_per_prompt": group_size,
        T + "train_batch_size": prompts,
        T + "policy_mini_batch_size": prompts // k.numerator,
        T + "update_epochs_per_batch": grpo.get("inner_steps", 1),
        AL + "advantage_estimator": "rloo" if advantage == "loo" else "grpo",
        AL + "loss_reduction": {v: k for k, v in LOSS_REDUCTION.items()}[aggregation],
        AL + "policy_loss_type": "gspo" if grpo.get("importance_sampling_level") == "sequence" else "regular",
        AL + "eps_clip_low": grpo.get("clip_eps", 0.2),
        AL + "eps_clip_high": grpo.get("clip_eps_high") or grpo.get("clip_eps", 0.2),
        AL + "use_kl_loss": kl > 0,
        GEN + "sampling_params.temperature": grpo.get("temperature", 1.0),
    }
    if advantage != "loo":
        out[AL + "grpo_norm_by_std"] = advantage == "mean_std"
    if kl > 0:
        out |= {AL + "kl_loss_coef": kl, AL + "kl_estimator_type": "k3"}
    if grpo.get("max_new_tokens") is not None:
        out[GEN + "sampling_params.max_generate_length"] = grpo["max_new_tokens"]
        if aggregation == "seq_mean_token_sum_norm":
            out[AL + "max_seq_len"] = grpo["max_new_tokens"]
    return out


@register_framework
class SkyRL(Framework):
    name = "skyrl"
    title = "SkyRL"
    files = "a run script of uv run -m skyrl.train.entrypoints.main_base (or one that runs it), or a legacy ppo_base_config.yaml"
    version = "NovaSky-AI/SkyRL@a956457, 2026-08"
    launch = re.compile(r"(?:skyrl\.train|skyrl_train)\.entrypoints\.main_base|examples\.(?:train\.)?[\w.]+\.main_\w+")
    tied = (GEN + "n_samples_per_prompt", T + "train_batch_size", T + "policy_mini_batch_size")

    def read(self, path: Path, overrides: list[str]) -> Config:
        text = path.read_text()
        variables, items = split_variables(overrides)
        layers: list[tuple[Any, bool]] = [(nested(DEFAULTS), False)]
        assumed: list[str] = []
        if is_script(path, text):
            words, assumed, module = self._script(path, variables)
            entry, notes = _entry(module)
            layers.append((nested(entry), False))
            assumed += notes
            layers.append((overrides_config([w for w in words if "=" in w and not w.startswith("-")])[0], True))
        else:
            layers.append((load_mapping(path), True))
            assumed.append("read as SkyRL's legacy YAML (deleted at 36f38c7); in one older than bf243b8 (2026-03-31) "
                           "token_mean averages each micro-batch's token mean, read as token_mean")  # fmt: skip
        layers.append((overrides_config(items)[0], True))
        return config_of(layers, path.name, tuple(assumed))

    def _script(self, path: Path, variables: dict[str, str], depth: int = 0) -> tuple[list[str], list[str], str]:
        """A run script's launch words, what was assumed and its entry module; a script that runs another gives
        that script's words with its own after them (they reach the other as its ``"$@"``). Raises ValueError."""
        text = path.read_text()
        match = _found(text, self.launch)
        delegates = match is None and depth < 4 and _found(text, DELEGATE) is not None
        try:
            script = read_script(text, DELEGATE if delegates else self.launch, variables)  # type: ignore[arg-type]
        except ScriptError as e:
            raise ValueError(f"{path}: {e}") from None
        if not delegates:
            return script.words, script.assumed, match.group() if match else ""
        inner = find_near(path.parent, script.words[0]) if script.words else None
        if inner is None:
            raise ValueError(f"{path}: runs {' '.join(script.words[:1])}, which is not here")
        words, assumed, module = self._script(inner, variables, depth + 1)
        note = f"read {inner.name}, which {path.name} runs, with {path.name}'s settings after its own"
        return [*words, *script.words[1:]], [*script.assumed, note, *assumed], module

    def runs(self, path: Path, text: str) -> bool:
        """Its launch command, or a script that runs one of SkyRL's (``bash run_gsm8k.sh ...``)."""
        try:
            return super().runs(path, text) or self._script(path, {})[2] != ""
        except ValueError:
            return False

    def recognises(self, data: dict[str, Any]) -> bool:
        return isinstance(data.get("trainer"), dict) and isinstance(data.get("generator"), dict)

    def budget(self, config: Config) -> Budget:
        return skyrl_budget(config)

    def settings(self, group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
        return skyrl_settings(group_size, samples_per_step, grpo)

    def edit(self, path: Path, text: str, changes: dict[str, Any]) -> str:
        """A script that runs another gets the changes after its ``bash`` line's words (they win there); else as the
        base edits (a YAML file keeps its other lines)."""
        if is_script(path, text) and _found(text, self.launch) is None and _found(text, DELEGATE) is not None:
            return edit_script(text, DELEGATE, {f"{key}=": word for key, word in zip(changes, self.words(changes))})
        return super().edit(path, text, changes)


def _entry(module: str) -> tuple[dict[str, Any], list[str]]:
    """The defaults an entry module adds to main_base's (ENTRY_DEFAULTS), and what the notes say of it."""
    entry, notes = ENTRY_DEFAULTS.get(module, {}), []
    if module.startswith("examples."):
        own = f" and its {', '.join(entry)}" if entry else ""
        notes.append(f"{module} is an example's own entry module: read with main_base's defaults{own}; what its code "
                     "changes is not read")  # fmt: skip
    if module.startswith(LEGACY):
        notes.append("skyrl-train <= 0.3: read with config.py@a956457's defaults (its YAML's for the keys read); its "
                     "token_mean (before bf243b8) averages each micro-batch's token mean, read as token_mean, the same for "
                     "micro-batches of equal tokens")  # fmt: skip
    return entry, notes


def _found(text: str, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The first match of ``pattern`` in a script's lines that are not comments."""
    return next((m for line in logical_lines(text) if not line.lstrip().startswith("#") and (m := pattern.search(line))), None)
