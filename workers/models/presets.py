"""Built-in model presets: tiny transformers models built from configs, never downloaded.

A preset is a character tokenizer over the task's vocabulary plus a small randomly initialised
causal LM, warmed up by a short supervised run on the task's training split until its expected
held-out accuracy reaches its WarmStart.target_accuracy (tiny-llama; chat-tiny, a BPE model shared by
all tasks, is built in workers.models.chat_tiny), then saved with ``save_pretrained``. Every trial
loads it back with ``from_pretrained`` from a cache folder, so all trials of a sweep (and of
later sweeps) start from identical weights.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

from workers.models.lm import LMPolicy, supervised_batch, token_settings
from workers.tasks import Task

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
RECIPE_VERSION = 1  # bump when the warm-start recipe changes: old cache entries are then ignored
CHAT_RECIPE_VERSION = 1  # the same for chat-tiny (workers.models.chat_tiny)
WarmStartProgress = Callable[[int, int, str], None]  # (step, at most this many steps, the last check in words)


@dataclass(frozen=True)
class WarmStart:
    """Supervised warm start: stop once expected held-out accuracy >= target (or at max_steps)."""

    target_accuracy: float = 0.35
    max_steps: int = 4000
    batch_size: int = 128
    lr: float = 3e-3
    check_every: int = 25
    check_prompts: int = 256
    seed: int = 0


def build_char_tokenizer(characters: str) -> PreTrainedTokenizerFast:
    """A character-level fast tokenizer (one token per character), left padding, no BOS added."""
    vocab = {PAD: 0, BOS: 1, EOS: 2, UNK: 3}
    for ch in dict.fromkeys(characters):
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK, padding_side="left"
    )


def tiny_llama(tokenizer: PreTrainedTokenizerFast, seed: int) -> LlamaForCausalLM:
    """About 100k parameters: 2 layers, width 64, 4 heads, tied embeddings."""
    config = LlamaConfig(
        **token_settings(tokenizer),
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


PRESETS: dict[str, Callable[[PreTrainedTokenizerFast, int], PreTrainedModel]] = {"tiny-llama": tiny_llama}  # built per task
LM_PRESETS = (*PRESETS, "chat-tiny")  # every language-model preset (chat-tiny: workers.models.chat_tiny, one for all tasks)


def expected_accuracy(model: PreTrainedModel, tokenizer, task: Task, n: int, max_new_tokens: int, temperature: float) -> float:
    """Mean over the first n held-out problems of P(sampling returns the exact answer)."""
    problems = task.eval_problems(n)
    with torch.no_grad():
        v = task.expected_reward(LMPolicy(model, tokenizer), problems, max_new_tokens=max_new_tokens, temperature=temperature)
    return float(v.mean())


def warm_start(
    model: PreTrainedModel,
    tokenizer,
    task: Task,
    recipe: WarmStart,
    max_new_tokens: int = 4,
    progress: WarmStartProgress | None = None,
) -> float:
    """Supervised training on answers + EOS until the target accuracy. Returns the accuracy reached. ``progress`` is
    called after every step (the step, recipe.max_steps, the last held-out accuracy against the target)."""
    rng = np.random.default_rng(recipe.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr)
    acc = 0.0
    checked = "held-out accuracy not checked yet"
    for step in range(1, recipe.max_steps + 1):
        batch = task.sample_train(recipe.batch_size, rng)
        prompts = tokenizer([p.prompt for p in batch], add_special_tokens=False)["input_ids"]
        answers = tokenizer([p.answer for p in batch], add_special_tokens=False)["input_ids"]
        ids, labels, att = supervised_batch(prompts, [a + [tokenizer.eos_token_id] for a in answers], tokenizer.pad_token_id)
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % recipe.check_every == 0:
            model.eval()
            acc = expected_accuracy(model, tokenizer, task, recipe.check_prompts, max_new_tokens, 1.0)
            model.train()
            checked = f"held-out accuracy {acc:.2f}, stops at {recipe.target_accuracy:g}"
            if acc >= recipe.target_accuracy:
                break
        if progress is not None:
            progress(step, recipe.max_steps, checked)
    return acc


def preset_path(
    preset: str, task: Task, cache_dir: Path, recipe: WarmStart = WarmStart(), progress: WarmStartProgress | None = None
) -> Path:
    """The warm-started preset, built once and cached under cache_dir: ``tiny-llama`` for this task
    (its character vocabulary and answers), ``chat-tiny`` for every task (workers.models.chat_tiny).
    ``progress``: called at every warm-start step of a build (never when the preset is cached).

    Safe under concurrency: one builder holds a file lock, others wait and then load its result;
    the folder appears atomically (built elsewhere, then renamed).

    Raises:
        ValueError: unknown preset (lists the valid names).
    """
    if preset == "chat-tiny":
        from workers.models.chat_tiny import ChatWarmStart, build_chat_tiny

        chat = ChatWarmStart()
        return _cached(
            Path(cache_dir),
            preset,
            {"preset": preset, "recipe": asdict(chat), "v": CHAT_RECIPE_VERSION},
            lambda: build_chat_tiny(chat, progress),
        )
    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r}; valid: {', '.join(LM_PRESETS)}")

    def build() -> tuple[PreTrainedModel, PreTrainedTokenizerFast, dict]:
        tokenizer = build_char_tokenizer(task.vocabulary())
        model = PRESETS[preset](tokenizer, recipe.seed)
        accuracy = warm_start(model, tokenizer, task, recipe, progress=progress)
        return model, tokenizer, {"task": repr(task), "warm_start_accuracy": accuracy, "recipe": asdict(recipe)}

    key = {"preset": preset, "task": repr(task), "recipe": asdict(recipe), "v": RECIPE_VERSION}
    return _cached(Path(cache_dir), preset, key, build)


def _cached(
    cache_dir: Path, preset: str, key: dict, build: Callable[[], tuple[PreTrainedModel, PreTrainedTokenizerFast, dict]]
) -> Path:
    """cache_dir/<preset>-<hash of key>, made by ``build`` (model, tokenizer, metadata) under a file lock."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    target = cache_dir / f"{preset}-{digest}"
    if (target / "groupscale-preset.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "groupscale-preset.json").exists():
            return target
        with torch.random.fork_rng():
            model, tokenizer, meta = build()
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
        hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside a caller's own progress display
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "groupscale-preset.json").write_text(json.dumps({"preset": preset, **meta}, indent=2))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    return target
