"""The ``chat-tiny`` preset: a small chat model that looks like a real one, built offline.

What makes it a fixture for chat-model code paths: a Qwen2-architecture causal LM; a byte-level
BPE tokenizer trained here with ``tokenizers`` (digits split one by one) whose post-processor
adds a BOS; a ChatML chat template; an end-of-turn token ``<|im_end|>`` that differs from the
tokenizer's EOS ``</s>`` and is listed in ``generation_config.eos_token_id`` (as in Qwen2.5-Instruct,
so generation that stops only at the tokenizer's EOS runs to max_new_tokens). It is warm-started by
a short supervised run on chat-formatted word problems (workers.tasks.word_problems) until its
sampled held-out pass rate reaches ``ChatWarmStart.target_pass_rate`` (inside [0.2, 0.8]: room
for GRPO to improve it, and signal in most groups).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from workers.models.lm import LMPolicy, supervised_batch, token_settings
from workers.rewards import numeric_match
from workers.tasks.word_problems import word_problems

PAD, BOS, EOS, IM_START, IM_END = "<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MAX_NEW_TOKENS = 48  # completions are about 15-20 tokens; room to see the end of turn


@dataclass(frozen=True)
class ChatWarmStart:
    """Supervised warm start on word problems: stop once the sampled held-out pass rate >= target."""

    target_pass_rate: float = 0.3
    max_steps: int = 2000
    batch_size: int = 32
    lr: float = 3e-3
    check_every: int = 50
    check_prompts: int = 128
    vocab_size: int = 800
    seed: int = 0


def build_chat_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on ``texts``; BOS added to every encoded text; ChatML template."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    core.decoder = decoders.ByteLevel()
    special = [PAD, BOS, EOS, IM_START, IM_END]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, initial_alphabet=alphabet, show_progress=False)
    core.train_from_iterator(texts, trainer)
    bos = core.token_to_id(BOS)
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos)]
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD, padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def chat_tiny_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen2ForCausalLM:
    """About 0.4M parameters: Qwen2, 2 layers, width 128, 4 heads (2 KV heads), tied embeddings."""
    config = Qwen2Config(
        **token_settings(tokenizer),
        hidden_size=128,
        intermediate_size=352,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id, eos_token_id=[im_end, tokenizer.eos_token_id]
    )
    return model


def pass_rate(policy: LMPolicy, problems: list[dict], max_new_tokens: int = MAX_NEW_TOKENS) -> tuple[float, float]:
    """(sampled pass rate by numeric_match at temperature 1, truncation rate) on ``problems``."""
    with torch.no_grad():
        ro = policy.sample([p["prompt"] for p in problems], max_new_tokens=max_new_tokens, temperature=1.0)
    passed = np.mean([numeric_match(t, p["solution"]) for t, p in zip(ro.texts, problems)])
    return float(passed), float(ro.truncated.float().mean())


def build_chat_tiny(
    recipe: ChatWarmStart = ChatWarmStart(), progress: Callable[[int, int, str], None] | None = None
) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast, dict]:
    """Train the tokenizer, build the model and warm-start it. Returns (model, tokenizer, metadata). ``progress`` is
    called after every warm-start step (the step, recipe.max_steps, the last held-out pass rate against the target)."""
    train = word_problems(4000, recipe.seed)
    held_out = word_problems(recipe.check_prompts, recipe.seed + 1)
    probe_tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    probe_tok.chat_template = CHAT_TEMPLATE
    corpus = [
        probe_tok.apply_chat_template(p["prompt"], tokenize=False, add_generation_prompt=True) + p["completion"] + IM_END
        for p in train
    ]
    tokenizer = build_chat_tokenizer(corpus, recipe.vocab_size)
    model = chat_tiny_model(tokenizer, recipe.seed)
    policy = LMPolicy(model, tokenizer)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    prompts = policy.encoder.encode([p["prompt"] for p in train])
    answers = [tokenizer(p["completion"], add_special_tokens=False)["input_ids"] + [im_end] for p in train]
    rng = np.random.default_rng(recipe.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr)
    rate, truncation, step = 0.0, 1.0, 0
    checked = "held-out pass rate not checked yet"
    model.train()
    for step in range(1, recipe.max_steps + 1):
        idx = rng.integers(0, len(train), size=recipe.batch_size)
        ids, labels, att = supervised_batch([prompts[i] for i in idx], [answers[i] for i in idx], tokenizer.pad_token_id)
        # The LM head only where there are labels (the answer): most positions are prompt.
        hidden = model.model(input_ids=ids, attention_mask=att).last_hidden_state[:, :-1]
        target = labels[:, 1:]
        keep = target != -100
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[keep]).float(), target[keep])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % recipe.check_every == 0:
            with torch.random.fork_rng():
                torch.manual_seed(recipe.seed)
                rate, truncation = pass_rate(policy, held_out)
            model.train()
            checked = f"held-out pass rate {rate:.2f}, stops at {recipe.target_pass_rate:g}"
            if rate >= recipe.target_pass_rate:
                break
        if progress is not None:
            progress(step, recipe.max_steps, checked)
    model.eval()
    meta = {
        "warm_start_pass_rate": rate,
        "warm_start_truncation_rate": truncation,
        "warm_start_steps": step,
        "max_new_tokens": MAX_NEW_TOKENS,
    }
    return model, tokenizer, meta
