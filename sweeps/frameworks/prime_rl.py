"""prime-rl (PrimeIntellect-ai/prime-rl): its ``rl.toml`` (``uv run rl @ rl.toml``) or the orchestrator's file of the
split form (``orch.toml``; a ``train.toml`` beside it is read as the trainer's), overrides as ``key=value`` or as
prime-rl's flags (``--orchestrator.group-size 16``), in the budget vocabulary, and back.

Keys and units (``packages/prime-rl-configs/src/prime_rl/configs/{orchestrator,trainer,rl}.py``,
``src/prime_rl/orchestrator/algo/grpo.py``, ``src/prime_rl/trainer/rl/{loss,train}.py``, PrimeIntellect-ai/prime-rl@559b447,
2026-08): ``orchestrator.group_size`` is G (default 1; a train source's own ``group_size`` overrides it);
``orchestrator.batch_size`` counts COMPLETIONS (one per trainable trace) a step, so it is B (128 when neither it nor
``token_batch_size`` is set; G must divide it); the trainer takes one ``optimizer.step()`` a step over all of it (k = 1,
mu = 1) and divides the summed token losses by the step's token count (token_mean); GRPO's advantage is r - group mean
without std (groupscale's ``mean``), the ratio is per token, there is no reference KL (kl_beta 0).

Refused unless dropped (``--drop KEY``), in this order: a G per source that differs, G < 2, token batches, another
algorithm or a length penalty, curricula, the trainer one step ahead of inference (hard-coded, without a key: named
``orchestrator.async`` here), the loss (DPPO's mask on the probability difference and kl_tau (log ratio)^2 by default:
no ratio clip), ``adv_tau``, ``filter_zero_advantages`` (drops samples without refill), an optimizer other than AdamW,
sampling that differs between sources. Old names are read, with a note: prime-rl refuses each since d612e23. The reward
is the train source's verifiers environment (``env.taskset.id``): a placeholder for its ``load_environment``.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from sweeps.frameworks.base import Budget, Config, Framework, Refused, register_framework, verifiers_rewards
from sweeps.frameworks.edits import edit_toml
from sweeps.frameworks.files import config_of, flag_words, load_mapping, nested, overrides_config, set_dotted

ORCH, TRAINER = "orchestrator.", "trainer."
ASYNC = ORCH + "async"  # not a prime-rl key: the name its one step of asynchrony is refused and dropped under
DEFAULTS = {  # prime-rl@559b447 packages/prime-rl-configs/src/prime_rl/configs/: the keys budget() reads
    ORCH + "group_size": 1,  # orchestrator.py L517
    ORCH + "max_off_policy_steps": 8,  # orchestrator.py L532
    ORCH + "algo.type": "grpo",  # orchestrator.py L448
    ORCH + "train.filter_zero_advantages": True,  # orchestrator.py L270
    ORCH + "train.sampling.temperature": 1.0,  # orchestrator.py L47 (max_completion_tokens L50: None, until EOS)
    TRAINER + "loss.type": "default",  # trainer.py L604, DefaultLossConfig L497-506
    TRAINER + "loss.dppo_mask_low": 0.2,
    TRAINER + "loss.dppo_mask_high": 0.2,
    TRAINER + "loss.adv_tau": 1.0,
    TRAINER + "loss.kl_tau": 1e-3,
    TRAINER + "optim.type": "adamw",  # trainer.py L607
    TRAINER + "optim.lr": 1e-6,  # trainer.py L416
}
BATCH_SIZE = 128  # orchestrator.py L627: B when neither batch_size nor token_batch_size is set
RENAMED = {  # an old key -> (the name prime-rl requires now, the commit that renamed it); every alias gone in d612e23
    ORCH + "rollouts_per_example": (ORCH + "group_size", "20f6449e"),
    ORCH + "train.sampling.max_tokens": (ORCH + "train.sampling.max_completion_tokens", "d2718f5"),
    ORCH + "sampling.max_completion_tokens": (ORCH + "train.sampling.max_completion_tokens", "d2718f5"),
    ORCH + "sampling.max_tokens": (ORCH + "train.sampling.max_completion_tokens", "d2718f5"),
    ORCH + "sampling.temperature": (ORCH + "train.sampling.temperature", "d2718f5"),
    ORCH + "train.env": (ORCH + "train.source", "d135ed4c"),
    ORCH + "env": (ORCH + "train.source", "d2718f5, d135ed4c"),
}
ZERO = ("drops the samples whose advantages are all 0 (each group whose rewards are equal) once the batch of B is cut, "
        "without refill, so how many completions train, and the token mean's count, depend on G; groupscale trains "
        "every completion it samples")  # fmt: skip
KEPT = (  # (key, the value groupscale trains, why another is refused): --drop KEY trains at that value
    (TRAINER + "loss.adv_tau", 1.0, "scales every advantage, which groupscale's objective does not"),
    (ORCH + "train.filter_zero_advantages", False, ZERO),
    (TRAINER + "optim.type", "adamw", "groupscale trains AdamW (prime-rl's default) at the file's lr"),
)
SPLIT = {"orchestrator": ("batch_size", "group_size", "rollouts_per_example", "token_batch_size", "train", "sampling"),
         "trainer": ("optim", "loss", "scheduler")}  # fmt: skip
TRAINER_FILES = ("train.toml", "trainer.toml")  # the trainer's file of the split form, beside the orchestrator's


def _nones(value: Any) -> Any:
    """The mapping with prime-rl's ``"None"`` (TOML has no null: its loader reads that string as None) as None."""
    if isinstance(value, dict):
        return {k: _nones(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nones(v) for v in value]
    return None if value == "None" else value


def _split(data: dict[str, Any]) -> str | None:
    """Which process's file of the split form ``data`` is (``orchestrator``, ``trainer``), None for an rl.toml."""
    if "orchestrator" in data or "trainer" in data:
        return None
    return next((process for process, keys in SPLIT.items() if any(key in data for key in keys)), None)


def _overrides(items: list[str], split: str | None) -> list[tuple[str, Any]]:
    """``key=value`` and prime-rl's flags as (dotted key, value), values read as YAML (``None`` as None); in the
    orchestrator's file of the split form a key outside ``orchestrator.`` and ``trainer.`` is the orchestrator's."""
    from omegaconf import OmegaConf

    values, keys = overrides_config(flag_words(items))
    pairs = [(key, OmegaConf.select(values, key)) for key in keys]
    pairs = [(key, _nones(OmegaConf.to_object(v) if OmegaConf.is_config(v) else v)) for key, v in pairs]
    return [(key if not split or key.split(".")[0] in ("orchestrator", "trainer") else f"{split}.{key}", v) for key, v in pairs]


def _dropped(config: Config, key: str) -> bool:
    """Whether ``--drop KEY`` (``KEY=null``) set ``key`` to nothing."""
    return key in config.given and config.get(key, raw=True) is None


def _named(config: Config, new: str, *old: str) -> str:
    """The key the file sets a setting with: ``new``, else an old name (noted: prime-rl refuses it now), else ``new``."""
    for key in (new, *old):
        if key in config.given:
            if key != new:
                name, commit = RENAMED[key]
                config.note(f"read {key} as {name}: prime-rl renamed it in {commit} and refuses the old name since d612e23")
            return key
    return new


def _sources(config: Config) -> tuple[str, list[dict[str, Any]]]:
    """The train sources (``[[orchestrator.train.source]]``, or an old file's env list) and their key."""
    key = _named(config, ORCH + "train.source", ORCH + "train.env", ORCH + "env")
    value = config.get(key)
    return key, [s if isinstance(s, dict) else {} for s in value] if isinstance(value, list) else []


def _across(config: Config, key: str, src: str, sources: list[dict[str, Any]], field: str, what: str) -> tuple[str, Any]:
    """The one value of a setting every train source trains with (a source's own ``field``, else ``key``'s, which it
    inherits) and the key that sets it. Raises Refused naming a source whose value differs."""
    own = {f"{src}.{i}.{field}": v for i in range(len(sources)) if (v := config.get(f"{src}.{i}.{field}")) is not None}
    found = ({} if sources and len(own) == len(sources) else {key: config.get(key)}) | own
    (first, value), *rest = found.items()
    for other, differs in rest:
        if differs != value:
            raise Refused(other, differs, f"differs from {first} = {value!r}: a sweep trains one {what} for every prompt; "
                          f"give {other}={value!r}, or --drop {other} to make it {key}'s ({config.get(key)!r})")  # fmt: skip
    return first, value


def _group_size(config: Config, src: str, sources: list[dict[str, Any]]) -> int:
    top = _named(config, ORCH + "group_size", ORCH + "rollouts_per_example")
    key, _ = _across(config, top, src, sources, "group_size", "G")
    group_size = config.number(key, minimum=1)
    if group_size < 2:
        unset = "" if key in config.given else " (the file sets none: 1 is prime-rl's default)"
        raise Refused(key, group_size, f"GRPO samples G >= 2 completions per prompt{unset}: with one, r - group mean is 0 "
                      f"and nothing trains; give {ORCH}group_size=G")  # fmt: skip
    return group_size


def _batch_size(config: Config, group_size: int) -> int:
    """B in completions (orchestrator.py L508-631). Raises Refused for token batches or a B that G does not divide."""
    tokens = config.get(ORCH + "token_batch_size")
    if tokens is not None:
        raise Refused(ORCH + "token_batch_size", tokens, "counts tokens a step, so how many completions train varies "
                      f"with their lengths; groupscale's B counts completions: --drop {ORCH}token_batch_size with "
                      f"{ORCH}batch_size=N measures G at N completions")  # fmt: skip
    batch = config.number(ORCH + "batch_size", minimum=1)
    if batch is None and _dropped(config, ORCH + "token_batch_size"):
        raise Refused(ORCH + "batch_size", None, f"unset with token_batch_size dropped: give {ORCH}batch_size=N")
    batch = BATCH_SIZE if batch is None else batch
    if batch % group_size:
        raise Refused(ORCH + "batch_size", batch, f"is not divisible by G = {group_size} (prime-rl refuses it too)")
    return batch


def _algorithms(config: Config, src: str, sources: list[dict[str, Any]]) -> None:
    for key in [ORCH + "algo", *(f"{src}.{i}.algo" for i, s in enumerate(sources) if isinstance(s.get("algo"), dict))]:
        kind, penalty = config.get(key + ".type", "grpo"), config.get(key + ".length_penalty")
        if kind != "grpo":
            raise Refused(key + ".type", kind, f"groupscale trains GRPO's r - group mean; --drop {key}.type measures G with it")
        if penalty is not None:
            raise Refused(key + ".length_penalty", penalty, "takes from each reward a penalty scaled by its group's "
                          f"longest, so a reward depends on G; --drop {key}.length_penalty measures G without it")  # fmt: skip


def _curricula(config: Config, src: str, sources: list[dict[str, Any]]) -> None:
    for i in range(len(sources)):
        key = f"{src}.{i}.curriculum"
        curriculum = config.get(key) or {}
        if curriculum.get("gates") or (curriculum.get("sampler") or {}).get("type", "standard") != "standard":
            raise Refused(key, curriculum, "admission gates reject groups (those whose advantages are all 0, by "
                          "default) and sample again, a difficulty_pool sampler picks prompts by their past rewards: the "
                          f"prompts that train depend on G; groupscale trains every group it samples: --drop {key}")  # fmt: skip


def _asynchrony(config: Config) -> None:
    stale = config.number(ORCH + "max_off_policy_steps")
    for old in ("async_level", "max_async_level", "strict_async_level"):  # removed in e792f9cf: part of this
        for section in (ORCH, TRAINER):
            config.get(section + old)
    if not _dropped(config, ASYNC):
        raise Refused(ASYNC, "one step", "prime-rl's trainer runs one step ahead of inference (hard-coded since "
                      f"e792f9cf, so it has no key: {ASYNC} is groupscale's name for it, which --drop takes): a step "
                      "trains on rollouts the previous weights sampled, and max_off_policy_steps = "
                      f"{stale} drops older ones; groupscale samples each generation with the current weights: --drop "
                      f"{ASYNC} measures G on-policy (nothing is stale, so max_off_policy_steps drops nothing)")  # fmt: skip


def _loss(config: Config) -> None:
    kind = config.get(TRAINER + "loss.type")
    if _dropped(config, TRAINER + "loss.type"):
        config.used.update(k for k in config.given if k.startswith(TRAINER + "loss.") and not k.endswith(".adv_tau"))
        config.note("the sweep trains PPO's clipped ratio at groupscale's default clip_eps 0.2 in place of prime-rl's "
              "loss; on-policy at k = 1 and mu = 1 the ratio is 1, so neither that clip nor DPPO's mask acts and "
              "kl_tau's (log ratio)^2 has no gradient")  # fmt: skip
        return
    low, high, tau = (config.get(TRAINER + "loss." + k) for k in ("dppo_mask_low", "dppo_mask_high", "kl_tau"))
    what = {
        "default": f"DPPO's mask (a token whose probability moved more than dppo_mask_low/high = {low}/{high} from the "
        f"sampler's leaves the policy term) and kl_tau = {tau} x (log ratio)^2",
        "ipo": f"IPO's mask (probability moved more than ipo_threshold = {config.get(TRAINER + 'loss.ipo_threshold', 0.1)}) "
        f"and kl_tau = {tau} x (log ratio)^2",
    }.get(kind, f"a custom loss ({config.get(TRAINER + 'loss.import_path')})")
    raise Refused(TRAINER + "loss.type", kind, f"trains {what}, no clip of the ratio, where groupscale trains PPO's "
                  f"clipped ratio; --drop {TRAINER}loss.type trains that at groupscale's default clip_eps 0.2 (with "
                  f"{ASYNC} dropped too, the ratio is 1 at k = 1 and mu = 1: neither the clip nor the mask acts)")  # fmt: skip


def _kept(config: Config, key: str, value: Any, why: str) -> None:
    if config.get(key, value) != value:
        raise Refused(key, config.get(key), f"{why}; --drop {key} measures G at {value!r}")


def _max_new_tokens(config: Config, src: str, sources: list[dict[str, Any]]) -> int:
    new = ORCH + "train.sampling.max_completion_tokens"
    old = (ORCH + "train.sampling.max_tokens", ORCH + "sampling.max_completion_tokens", ORCH + "sampling.max_tokens")
    key, tokens = _across(config, _named(config, new, *old), src, sources, "sampling.max_completion_tokens", "length cap")
    if tokens is None:
        seq_len = config.get("seq_len") or config.get(ORCH + "seq_len", 2048)
        raise Refused(key, None, "unset: prime-rl samples until EOS or the context's end (the trainer keeps seq_len = "
                      f"{seq_len} tokens of prompt and completion); groupscale caps each completion: give {new}=N")  # fmt: skip
    if "turns" in repr(sources):
        config.note(f"max_new_tokens {tokens} is prime-rl's cap per turn: a multi-turn environment's completions are longer")
    return config.number(key, minimum=1)


def _first(config: Config, *keys: str) -> str | None:
    """The first of ``keys`` the config sets (the shared key, then the orchestrator's and the trainer's), as written."""
    values = [config.text(key) for key in keys]  # each read: prime-rl requires them to agree (rl.py L442-443)
    return next((value for value in values if value is not None), None)


def prime_rl_budget(config: Config) -> Budget:
    """prime-rl's keys in the vocabulary. Raises Refused for the first setting groupscale cannot train (in the order
    of the module's docstring), naming the others it refuses after it."""
    src, sources = _sources(config)
    found: list[Refused] = []

    def attempt(check: Any, *args: Any) -> Any:
        try:
            return check(*args)
        except Refused as e:
            found.append(e)
            return None

    group_size = attempt(_group_size, config, src, sources)
    batch = attempt(_batch_size, config, group_size or 1)
    attempt(_algorithms, config, src, sources)
    attempt(_curricula, config, src, sources)
    attempt(_asynchrony, config)
    attempt(_loss, config)
    for key, value, why in KEPT:
        attempt(_kept, config, key, value, why)
    temperature = _named(config, ORCH + "train.sampling.temperature", ORCH + "sampling.temperature")
    temperature = attempt(_across, config, temperature, src, sources, "sampling.temperature", "temperature")
    tokens = attempt(_max_new_tokens, config, src, sources)
    if found:
        if found[1:]:
            found[0].args = (f"{found[0]} (refused after it too: {', '.join(e.key for e in found[1:])})",)
        raise found[0]
    grpo = {
        "steps_per_generation": 1,  # train.py L566: one optimizer.step() a step, over all of B
        "inner_steps": 1,
        "loss_aggregation": "token_mean",  # train.py L300-323: the summed token losses / the step's token count
        "advantage": "mean",  # algo/grpo.py L30: r - group mean, no std
        "importance_sampling_level": "token",  # loss.py L101-106
        "clip_eps": 0.2,  # prime-rl's loss dropped: PPO's clip at groupscale's default
        "kl_beta": 0.0,  # no reference KL
        "lr": config.number(TRAINER + "optim.lr", kind=float),
        "temperature": config.number(temperature[0], kind=float),
        "max_new_tokens": tokens,
    }
    steps = _first(config, "max_steps", ORCH + "max_steps", TRAINER + "max_steps")
    data = _first(config, f"{src}.0.env.taskset.id", f"{src}.0.env.id", f"{src}.0.id", ORCH + "environment.id")
    return Budget(
        group_size, batch, grpo, model=_first(config, "model.name", ORCH + "model.name", TRAINER + "model.name"),
        steps=None if steps is None else int(steps), data=data, prompts={"prompt_format": "chat"},  # environments' chats
        rewards=verifiers_rewards(data),  # its environment's rubric
    )  # fmt: skip


def prime_rl_settings(group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
    """prime-rl keys for G at B completions with ``grpo``: G, B (completions already), the sampling, every sample
    trained. Raises Refused for an objective prime-rl does not train."""
    trains = {
        "steps_per_generation": (1, "prime-rl's trainer takes one optimizer step a batch (k = 1)"),
        "inner_steps": (1, "prime-rl passes over each batch once (mu = 1)"),
        "advantage": ("mean", "prime-rl's GRPO advantage is r - group mean (groupscale's mean)"),
        "loss_aggregation": ("token_mean", "prime-rl divides a step's summed token losses by its token count"),
        "importance_sampling_level": ("token", "prime-rl's ratio is per token"),
        "kl_beta": (0, "prime-rl's GRPO has no KL to a reference model"),
    }
    for key, (value, why) in trains.items():
        got = grpo.get(key, value)
        if got != value:
            raise Refused(key, str(got) if isinstance(got, Fraction) else got, why)
    temperature = grpo.get("temperature", 1.0)
    if temperature > 2:
        raise Refused("temperature", temperature, "prime-rl samples at temperatures up to 2")
    if samples_per_step % group_size:
        raise Refused(ORCH + "group_size", group_size, f"does not divide {ORCH}batch_size = {samples_per_step}")
    out: dict[str, Any] = {ORCH + "group_size": group_size, ORCH + "batch_size": samples_per_step}
    out[ORCH + "train.sampling.temperature"] = temperature
    if grpo.get("max_new_tokens") is not None:
        out[ORCH + "train.sampling.max_completion_tokens"] = grpo["max_new_tokens"]
    out[ORCH + "train.filter_zero_advantages"] = False  # groupscale trains every completion it samples
    return out


def _flag(value: Any) -> str:
    """A value as prime-rl's command line reads it (``true``, ``3e-06``, ``None``)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "None" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _edit_group_size(orchestrator: Any, group_size: int) -> None:
    """The orchestrator's table with G set where the file sets it (its own name, old or new, and each train source
    that sets its own), else as ``group_size``. Raises Refused for an in-flight cap below G, which prime-rl refuses."""
    names = [name for name in ("group_size", "rollouts_per_example") if name in orchestrator]
    train = orchestrator.get("train")
    sources = [s for s in (train.get("source") or [] if isinstance(train, dict) else []) if "group_size" in s]
    for name in names:
        orchestrator[name] = group_size
    for source in sources:
        source["group_size"] = group_size
    if not names and not sources:
        orchestrator["group_size"] = group_size
    concurrency = orchestrator.get("concurrency")
    for field in ("max_inflight", "initial_inflight"):
        cap = concurrency.get(field) if isinstance(concurrency, dict) else None
        if isinstance(cap, int) and cap < group_size:
            raise Refused(f"{ORCH}concurrency.{field}", cap, f"is below G = {group_size}, which prime-rl refuses")


@register_framework
class PrimeRL(Framework):
    name = "prime-rl"
    title = "prime-rl"
    files = "an rl.toml (uv run rl @ rl.toml), or the orchestrator's orch.toml of the split form"
    version = "PrimeIntellect-ai/prime-rl@559b447, 2026-08"
    tied = (ORCH + "group_size",)  # B is batch_size, in completions: it stays as G moves

    def read(self, path: Path, overrides: list[str]) -> Config:
        data = _nones(load_mapping(path))
        split, notes = _split(data), []
        if split == "trainer" or (split is None and "orchestrator" not in data):
            raise ValueError("no [orchestrator] (nor the orchestrator's own file of the split form), where prime-rl sets "
                             "G and B: give the rl.toml or the orchestrator's file")  # fmt: skip
        if split:
            data = {"orchestrator": data}
            trainer = next((path.parent / n for n in TRAINER_FILES if (path.parent / n).is_file()), None)
            if trainer is not None:
                data["trainer"] = _nones(load_mapping(trainer))
            notes = [f"read {path.name} as prime-rl's orchestrator file of the split form, its keys named as in rl.toml "
                     "(under orchestrator.)", f"read {trainer.name} beside it as the trainer's" if trainer else
                     "no train.toml beside it: the trainer's defaults (lr 1e-6, prime-rl's default loss)"]  # fmt: skip
        for key, value in _overrides(overrides, split):
            set_dotted(data, key, value)
        return config_of([(nested(DEFAULTS), False), (data, True)], path.name, tuple(notes))

    def recognises(self, data: dict[str, Any]) -> bool:
        if isinstance(data.get("orchestrator"), dict):
            return True
        return "batch_size" in data and ("group_size" in data or "rollouts_per_example" in data)

    def budget(self, config: Config) -> Budget:
        return prime_rl_budget(config)

    def settings(self, group_size: int, samples_per_step: int, grpo: dict[str, Any]) -> dict[str, Any]:
        return prime_rl_settings(group_size, samples_per_step, grpo)

    def edit(self, path: Path, text: str, changes: dict[str, Any]) -> str:
        """The TOML with G set where it sets G (tomlkit: comments and layout kept); other keys as edit_toml sets them
        (without ``orchestrator.`` in the split form)."""
        import tomlkit

        doc = tomlkit.parse(text)
        split = _split(doc.unwrap())
        if split == "trainer":
            raise ValueError("prime-rl's trainer file of the split form holds no G: edit the orchestrator's")
        if not split and "orchestrator" not in doc:
            doc["orchestrator"] = tomlkit.table()
        if ORCH + "group_size" in changes:
            _edit_group_size(doc if split else doc["orchestrator"], changes[ORCH + "group_size"])
        rest = {key.removeprefix(ORCH) if split else key: v for key, v in changes.items() if key != ORCH + "group_size"}
        return edit_toml(tomlkit.dumps(doc), rest)

    def words(self, settings: dict[str, Any]) -> list[str]:
        """prime-rl's flags, to follow ``uv run rl @ rl.toml``, after a note on what prime-rl trains otherwise."""
        note = ("# note: prime-rl trains one step off-policy with its own loss (DPPO's mask by default); G was measured "
                "on-policy with PPO's clip, which at k = 1 and mu = 1 does not act")  # fmt: skip
        return [note, *(f"--{key.replace('_', '-')} {_flag(value)}" for key, value in settings.items())]
