"""NeMo-RL (NVIDIA-NeMo/RL): its GRPO YAML configs (``defaults:`` chains, ``_override_``, ``${mul:...}``) and run
scripts of ``uv run examples/run_grpo.py --config X.yaml key=value`` in the budget vocabulary, and back.

Loading (``nemo_rl/utils/config.py``, NVIDIA-NeMo/RL@7ea279a, 2026-08): a file's ``defaults:`` (a path or a list,
relative to that file's folder) load first, merged left to right, the file over them; a top-level section holding
``_override_: true`` replaces the parent's section instead of merging into it; ``${...}`` resolves after the whole chain
and the ``key=value`` overrides, with the resolvers ``add``, ``mul``, ``div`` and ``max`` (registered here as NeMo-RL
registers them).

Keys and units (``examples/configs/grpo_math_1B.yaml``, ``nemo_rl/algorithms/grpo.py`` GRPOConfig,
``loss/loss_functions.py`` ClippedPGLossConfig, ``advantage_estimator.py``, all @7ea279a): ``grpo.num_prompts_per_step``
counts PROMPTS per generation, each sampled ``grpo.num_generations_per_prompt`` (G) times: B = prompts x G completions;
``policy.train_global_batch_size`` counts COMPLETIONS per optimizer step: k = B / it; one pass (mu = 1, no epochs key).
``loss_fn.token_level_loss`` true is a token mean, false a sequence mean of token means; with
``sequence_level_importance_ratios`` the ratio is per sequence (GSPO). The advantage (``grpo.adv_estimator.*``, by
default the interpolations of ``grpo.use_leave_one_out_baseline`` and ``grpo.normalize_rewards``): LOO baseline with
the LOO std (loo_std), LOO alone (loo), the group mean over its Bessel std (mean_std) or alone (mean). The KL is a loss
term ``reference_policy_kl_penalty`` of type k3; its default input and output clamps (20, 10) are kept as inert: they
bind only where a token's log-ratio to the reference passes 20 or its k3 passes 10, which a run near its reference
does not reach. The lr is the Megatron optimizer's when ``policy.megatron_cfg.enabled``, else ``policy.optimizer``'s.

Rewards are environments (``nemo_rl/environments/utils.py`` ENV_REGISTRY, ``math_environment.py`` L122-140, @7ea279a): a
dataset's ``env_name`` (``data.train`` or ``data.default``; ``math`` in grpo_math_1B.yaml) scores with ``env.<name>``'s
settings (math: ``math_verify_impl`` hf_math_verify, the answer boxed and compared by math-verify), so the spec's entry
is a placeholder saying so; a ResponseDataset's ``input_key`` and ``output_key`` (``data/datasets/response_datasets/
response_dataset.py`` L45-46) are the prompt and answer columns.
"""

from __future__ import annotations

import re
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from sweeps.frameworks.base import Budget, Config, Framework, Refused, fill_in, register_framework, whole
from sweeps.frameworks.edits import is_script
from sweeps.frameworks.expansion import shown, unknown_in
from sweeps.frameworks.files import config_of, find_near, nested, overrides_config, script_words, split_variables

RESOLVERS = {  # nemo_rl/utils/config.py's register_omegaconf_resolvers, for ${mul:...} in the configs
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b, "max": lambda a, b: max(a, b),
}  # fmt: skip

P, L = "grpo.", "loss_fn."
DEFAULTS = {  # grpo_math_1B.yaml@7ea279a (the config run_grpo.py reads without --config): the keys budget() reads
    P + "num_prompts_per_step": 32,
    P + "num_generations_per_prompt": 16,
    P + "max_num_steps": 1000000,
    P + "normalize_rewards": True,
    P + "use_leave_one_out_baseline": True,
    P + "adv_estimator.name": "grpo",
    P + "adv_estimator.normalize_rewards": "${grpo.normalize_rewards}",
    P + "adv_estimator.use_leave_one_out_baseline": "${grpo.use_leave_one_out_baseline}",
    L + "reference_policy_kl_penalty": 0.01,
    L + "reference_policy_kl_type": "k3",
    L + "ratio_clip_min": 0.2,
    L + "ratio_clip_max": 0.2,
    L + "sequence_level_importance_ratios": False,
    L + "token_level_loss": True,
    "policy.model_name": "Qwen/Qwen2.5-1.5B",
    "policy.train_global_batch_size": 512,
    "policy.max_total_sequence_length": 512,
    "policy.megatron_cfg.enabled": False,
    "policy.megatron_cfg.optimizer.lr": 5e-6,
    "policy.optimizer.kwargs.lr": 5e-6,
    "policy.generation.max_new_tokens": "${policy.max_total_sequence_length}",
    "policy.generation.temperature": 1.0,
}
MAX_DEPTH = 8  # a config that inherits from itself stops here
UNBOUNDED = 1000000  # grpo_math_1B's max_num_steps: no limit but max_num_epochs of the data set
ADVANTAGES = {(True, True): "loo_std", (True, False): "loo", (False, True): "mean_std", (False, False): "mean"}
DRAWS = "so the prompts that train depend on G, which groupscale's trainer does not do"
REFUSED = {  # key -> (its off value, why groupscale does not train it); absent keys (older versions) are off
    P + "use_dynamic_sampling": (False, "dynamic sampling keeps only the groups whose rewards differ and generates again "
                                 f"(batch_multiplier x the prompts each time) until a step's prompts are kept, {DRAWS}"),
    P + "overlong_filtering": (False, "masks the loss of truncated completions, which still count in B"),
    P + "async_grpo.enabled": (False, "asynchronous GRPO trains on completions of older policies; groupscale trains on-policy"),
    P + "reward_shaping.enabled": (False, "shapes the rewards by length (DAPO's overlong penalty), which groupscale's task "
                                   "rewards do not"),
    P + "reward_scaling.enabled": (False, "rescales the rewards before the advantage"),
    P + "advantage_clip_low": (None, "clips the advantages"),
    P + "advantage_clip_high": (None, "clips the advantages"),
    P + "seq_logprob_error_threshold": (None, "masks the sequences whose training and generation log-probs disagree"),
    P + "invalid_tool_call_advantage": (None, "sets the advantage of invalid tool calls"),
    P + "malformed_thinking_advantage": (None, "sets the advantage of malformed <think> tags"),
    P + "max_rollout_turns": (1, "multi-turn rollouts are not what groupscale generates (one completion a prompt)"),
    L + "ratio_clip_c": (None, "dual clip is not in groupscale's PPO-clip loss"),
    L + "use_on_policy_kl_approximation": (False, "weights the KL by the importance ratio; groupscale's k3 is not weighted"),
    L + "use_importance_sampling_correction": (False, "reweights by the generation engine's probabilities; groupscale "
                                               "generates with the policy it trains"),
    L + "truncated_importance_sampling_type": (None, "truncated importance sampling (TIS, ICE-POP) is not in groupscale's loss"),
    L + "force_on_policy_ratio": (False, "fixes the ratio at 1 (no clipping); groupscale trains the clipped ratio"),
    L + "use_kl_in_reward": (False, "a KL penalty in the reward is not trained by groupscale; use reference_policy_kl_penalty"),
    L + "use_cispo": (False, "CISPO is not groupscale's PPO-clip loss"),
    L + "disable_ppo_ratio": (False, "the REINFORCE surrogate without a ratio is not groupscale's PPO-clip loss"),
    L + "positive_example_nll_weight": (0.0, "an NLL loss on correct completions (VAPO) is not trained by groupscale"),
}  # fmt: skip


def load_nemo(path: Path, notes: list[str], depth: int = 0) -> dict[str, Any]:
    """A NeMo-RL YAML with its ``defaults:`` chain merged as NeMo-RL merges it (``_override_`` too), interpolations
    left for later; a parent that is not here is said in ``notes`` (its keys take DEFAULTS). Raises ValueError."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    with warnings.catch_warnings():  # OmegaConf 2.4 renames it register_resolver; 2.3's register_resolver is another API
        warnings.simplefilter("ignore", UserWarning)
        for name, resolver in RESOLVERS.items():  # as NeMo-RL's loader registers them, when its file is read
            OmegaConf.register_new_resolver(name, resolver, replace=True)

    try:
        loaded = OmegaConf.to_container(OmegaConf.load(path), resolve=False)  # OmegaConf's YAML: 1e-8 is a float
    except (OSError, UnicodeDecodeError, yaml.YAMLError, OmegaConfBaseException) as e:
        raise ValueError(f"cannot read {path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} holds no mapping of settings")
    data: dict[str, Any] = {str(k): v for k, v in loaded.items()}
    defaults = data.pop("defaults", None)
    if not defaults or depth >= MAX_DEPTH:
        return data
    base: dict[str, Any] = {}
    for entry in [defaults] if isinstance(defaults, str) else defaults:
        parent = path.parent / str(entry)
        if parent.is_file():
            base = _merge(base, load_nemo(parent, notes, depth + 1))
        else:
            notes.append(f"{path.name}'s defaults {entry} is not here: the keys it would set take grpo_math_1B.yaml's values")
    return _merge(base, data)


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``merge_with_override``: a top-level section of ``child`` marked ``_override_: true`` replaces base's."""
    from omegaconf import OmegaConf

    base = dict(base)
    for key, value in child.items():
        if isinstance(value, dict) and value.pop("_override_", False):
            base.pop(key, None)
    merged = OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(child))
    return OmegaConf.to_container(merged, resolve=False)  # type: ignore[return-value]


def nemo_budget(config: Config) -> Budget:
    """NeMo-RL's keys in the vocabulary. Raises Refused."""
    group_size = config.number(P + "num_generations_per_prompt", minimum=1)
    if group_size < 2:
        raise Refused(P + "num_generations_per_prompt", group_size, "GRPO samples G >= 2 completions per prompt")
    samples = config.number(P + "num_prompts_per_step", minimum=1) * group_size
    for key, (off, why) in REFUSED.items():
        if config.get(key) not in (None, off):
            raise Refused(key, config.get(key), f"{why}; --drop {key} measures G without it")
    config.get(P + "batch_multiplier")  # dynamic sampling's oversampling: refused with it, else unused
    if config.get(P + "adv_estimator.name") != "grpo":
        raise Refused(P + "adv_estimator.name", config.get(P + "adv_estimator.name"), "groupscale trains GRPO's group "
                      "baselines; allowed: grpo")  # fmt: skip
    mini = config.number("policy.train_global_batch_size", minimum=1)
    k = whole("policy.train_global_batch_size", samples, mini, "optimizer steps per generation (num_prompts_per_step x "
              "num_generations_per_prompt / train_global_batch_size)")  # fmt: skip
    if mini % group_size:
        raise Refused("policy.train_global_batch_size", mini, f"an optimizer step of {mini} completions splits the groups "
                      f"of G = {group_size}; groupscale's steps take whole groups")  # fmt: skip
    token_level, sequence = config.get(L + "token_level_loss") is True, config.get(L + "sequence_level_importance_ratios") is True
    if token_level and sequence:
        raise Refused(L + "sequence_level_importance_ratios", True, "NeMo-RL requires token_level_loss: false with it")
    megatron = config.get("policy.megatron_cfg.enabled") is True
    grpo: dict[str, Any] = {
        "steps_per_generation": k,
        "inner_steps": 1,
        "loss_aggregation": "token_mean" if token_level else "seq_mean_token_mean",
        "importance_sampling_level": "sequence" if sequence else "token",
        "advantage": _advantage(config),
        "clip_eps": config.number(L + "ratio_clip_min", kind=float),
        "clip_eps_high": config.number(L + "ratio_clip_max", kind=float),
        "kl_beta": _kl(config),
        "lr": config.number("policy.megatron_cfg.optimizer.lr" if megatron else "policy.optimizer.kwargs.lr", kind=float),
        "temperature": config.number("policy.generation.temperature", kind=float),
        "max_new_tokens": config.number("policy.generation.max_new_tokens"),
    }
    steps = config.number(P + "max_num_steps")
    data = config.first_file("data.train.data_path") or config.first_file("data.train.dataset_name")
    # its data processors fill prompt_file's {} with the problem, then apply the chat template
    template = config.text("data.default.prompt_file") or config.text("data.prompt_file")
    column = _data_key(config, "input_key")
    prompts = {"prompt_format": "chat", **({"prompt_template": template} if template else {}),
               **({"prompt_column": column} if column else {})}  # fmt: skip
    return Budget(group_size, samples, grpo, model=config.text("policy.model_name"), rewards=_rewards(config),
                  steps=None if steps is None or steps >= UNBOUNDED else steps * k, data=data, prompts=prompts)  # fmt: skip


def _data_key(config: Config, key: str) -> str | None:
    """The training dataset's setting, else the datasets' default (data.default), as written."""
    return config.text(f"data.train.{key}") or config.text(f"data.default.{key}")


def _rewards(config: Config) -> list[dict[str, Any]]:
    """The dataset's environment as the entry to fill in (a function that scores as it does), its answer column."""
    env, answer = _data_key(config, "env_name"), _data_key(config, "output_key")
    if env is None:
        return []
    impl = config.text(f"env.{env}.math_verify_impl") or ("hf_math_verify" if env == "math" else None)
    config.assumed.append(f"NeMo-RL scores with its {env} environment{f' ({impl})' if impl else ''}, not a file: fill in "
                          "task.rewards with a function that scores as it does"
                          + ("; groupscale's built-in {name: math_verify} is the nearest" if impl else ""))  # fmt: skip
    return fill_in(f"NeMo-RL env {env}'s scorer as rewards.py:NAME", **({"answer_column": answer} if answer else {}))


def _advantage(config: Config) -> str:
    """The estimator's own keys (interpolations of the top-level ones unless a file sets them; older versions: the
    top-level ones alone)."""
    flags = []
    for name in ("use_leave_one_out_baseline", "normalize_rewards"):
        value = config.get(P + "adv_estimator." + name, config.get(P + name))
        if not isinstance(value, bool):
            raise Refused(P + "adv_estimator." + name, value, "is not true or false")
        flags.append(value)
    return ADVANTAGES[(flags[0], flags[1])]


def _kl(config: Config) -> float:
    beta = config.number(L + "reference_policy_kl_penalty", 0.0, float)
    if beta and config.get(L + "reference_policy_kl_type") != "k3":
        raise Refused(L + "reference_policy_kl_type", config.get(L + "reference_policy_kl_type"), "groupscale's KL is k3; "
                      f"allowed: k3, or --drop {L}reference_policy_kl_penalty measures G without a KL")  # fmt: skip
    return beta


def nemo_settings(group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
    """NeMo-RL keys for G at B completions with ``grpo``. Raises Refused when NeMo-RL cannot express it."""
    k = Fraction(grpo.get("steps_per_generation", 1))
    if k.denominator != 1 or samples_per_step % k.numerator or (samples_per_step // k.numerator) % group_size:
        raise Refused("steps_per_generation", str(k), f"NeMo-RL's train_global_batch_size splits one generation of B = "
                      f"{samples_per_step} into optimizer steps of whole groups of G = {group_size}")  # fmt: skip
    if grpo.get("inner_steps", 1) != 1:
        raise Refused("inner_steps", grpo.get("inner_steps"), "NeMo-RL makes one pass over each generation")
    flags = {v: k for k, v in ADVANTAGES.items()}.get(grpo.get("advantage", "loo"))
    if flags is None:
        raise Refused("advantage", grpo.get("advantage"), f"NeMo-RL's grpo estimator gives {', '.join(ADVANTAGES.values())}")
    aggregation = grpo.get("loss_aggregation", "seq_mean_token_mean")
    sequence = grpo.get("importance_sampling_level") == "sequence"
    if aggregation not in ("token_mean", "seq_mean_token_mean") or (sequence and aggregation == "token_mean"):
        raise Refused("loss_aggregation", aggregation, "NeMo-RL aggregates by token_mean or seq_mean_token_mean "
                      "(the latter with sequence-level ratios)")  # fmt: skip
    kl = grpo.get("kl_beta", 0.0)
    out = {
        P + "num_generations_per_prompt": group_size,
        P + "num_prompts_per_step": samples_per_step // group_size,
        "policy.train_global_batch_size": samples_per_step // k.numerator,
        P + "adv_estimator.name": "grpo",
        P + "use_leave_one_out_baseline": flags[0],
        P + "normalize_rewards": flags[1],
        P + "adv_estimator.use_leave_one_out_baseline": flags[0],
        P + "adv_estimator.normalize_rewards": flags[1],
        L + "token_level_loss": aggregation == "token_mean",
        L + "sequence_level_importance_ratios": sequence,
        L + "ratio_clip_min": grpo.get("clip_eps", 0.2),
        L + "ratio_clip_max": grpo.get("clip_eps_high") or grpo.get("clip_eps", 0.2),
        L + "reference_policy_kl_penalty": kl,
        "policy.generation.temperature": grpo.get("temperature", 1.0),
    }
    if kl > 0:
        out[L + "reference_policy_kl_type"] = "k3"
    if grpo.get("max_new_tokens") is not None:
        out["policy.generation.max_new_tokens"] = grpo["max_new_tokens"]
    return out


@register_framework
class NemoRL(Framework):
    name = "nemo-rl"
    title = "NeMo-RL"
    files = "a GRPO YAML (with its defaults: chain), or a run script of uv run examples/run_grpo.py --config X.yaml"
    version = "NVIDIA-NeMo/RL@7ea279a, 2026-08"
    launch = re.compile(r"run_grpo\w*\.py")
    tied = (P + "num_generations_per_prompt", P + "num_prompts_per_step")  # train_global_batch_size = B / k stays

    def read(self, path: Path, overrides: list[str]) -> Config:
        text = path.read_text()
        variables, items = split_variables(overrides)
        layers: list[tuple[Any, bool]] = [(nested(DEFAULTS), False)]
        notes: list[str] = []
        if is_script(path, text) and self.launch is not None:
            script = script_words(path, self.launch, variables)
            name, words = _config_option(script.words)
            notes += script.assumed
            if name is None:
                notes.append("no --config: run_grpo.py reads examples/configs/grpo_math_1B.yaml (its keys: NeMo-RL's defaults)")
            elif unknown_in(name):
                raise Refused("--config", shown(name), f"depends on {', '.join(unknown_in(name))}, which only running the "
                              "script tells; give the variable after the file (NAME=value)")  # fmt: skip
            elif (file := find_near(path.parent, name)) is None:
                raise ValueError(f"{path}: its --config {name} is not here (looked in {path.parent} and the folders above)")
            else:
                layers.append((load_nemo(file, notes), True))
            layers.append((overrides_config([w for w in words if "=" in w and not w.startswith(("-", "~"))])[0], True))
        else:
            layers.append((load_nemo(path, notes), True))
        layers.append((overrides_config(items)[0], True))
        return config_of(layers, path.name, tuple(notes))

    def recognises(self, data: dict[str, Any]) -> bool:
        return "loss_fn" in data or {"grpo", "policy"} <= data.keys()

    def budget(self, config: Config) -> Budget:
        return nemo_budget(config)

    def settings(self, group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
        return nemo_settings(group_size, samples_per_step, grpo)


def _config_option(words: list[str]) -> tuple[str | None, list[str]]:
    """run_grpo.py's ``--config X`` (or ``--config=X``) and the other words."""
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag == "--config":
            end = i + 1 if eq else i + 2
            return (value if eq else " ".join(words[i + 1 : end]), words[:i] + words[end:])
    return None, words
