"""Chat models: one BOS, stop at any stop id, masks that end at the first stop, the chat-tiny preset."""

import json

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from workers.models.chat_tiny import CHAT_TEMPLATE, IM_END, build_chat_tokenizer
from workers.models.lm import LMPolicy
from workers.models.prompts import PromptEncoder, stop_token_ids
from workers.rollout import completion_mask_from_stops

CORPUS = ["Tom has 3 apples and gets 4 more. 3 + 4 = 7. #### 7", "hello world", "<|im_start|>user\nhi<|im_end|>"] * 20
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tom has 3 apples."}]


@pytest.fixture(scope="module")
def bos_tokenizer():
    """A BPE tokenizer whose post-processor adds <s> (like Llama's), with a ChatML template."""
    return build_chat_tokenizer(CORPUS, 300)


def test_the_tokenizer_adds_one_bos_to_a_string_prompt(bos_tokenizer):
    ids = PromptEncoder(bos_tokenizer).encode(["Tom has 3 apples."])[0]
    assert ids[0] == bos_tokenizer.bos_token_id and ids.count(bos_tokenizer.bos_token_id) == 1


def test_a_chat_prompt_gets_one_bos_and_the_generation_prompt(bos_tokenizer):
    enc = PromptEncoder(bos_tokenizer)
    ids = enc.encode([MESSAGES])[0]
    assert ids.count(bos_tokenizer.bos_token_id) == 1 and ids[0] == bos_tokenizer.bos_token_id
    assert enc.render(MESSAGES).endswith("<|im_start|>assistant\n")
    # the naive way, apply_chat_template's text tokenized with special tokens, gives the same here ...
    naive = bos_tokenizer(enc.render(MESSAGES))["input_ids"]
    assert naive == ids


def test_a_template_that_writes_the_bos_gets_none_added(bos_tokenizer):
    tok = build_chat_tokenizer(CORPUS, 300)
    tok.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE
    ids = PromptEncoder(tok).encode([MESSAGES])[0]
    assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id
    # ... while tokenizing the template's text with special tokens would give two (the bug this avoids)
    assert (
        tok(tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True))["input_ids"][:2]
        == [tok.bos_token_id] * 2
    )


def test_no_bos_for_a_tokenizer_that_adds_none():
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"], show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>")
    ids = PromptEncoder(tok).encode(["hello world"])[0]
    assert tok.bos_token_id not in ids


def test_chat_template_false_joins_the_contents(bos_tokenizer):
    enc = PromptEncoder(bos_tokenizer, chat_template=False)
    assert enc.render(MESSAGES) == "Be brief.\nTom has 3 apples."
    assert "<|im_start|>" not in bos_tokenizer.decode(enc.encode([MESSAGES])[0])


def test_stop_ids_are_the_union_of_generation_config_and_the_tokenizer(bos_tokenizer):
    im_end = bos_tokenizer.convert_tokens_to_ids(IM_END)
    assert stop_token_ids(bos_tokenizer, [im_end, bos_tokenizer.eos_token_id]) == (im_end, bos_tokenizer.eos_token_id)
    assert stop_token_ids(bos_tokenizer, im_end) == (im_end, bos_tokenizer.eos_token_id)
    assert stop_token_ids(bos_tokenizer, None) == (bos_tokenizer.eos_token_id,)


def test_completion_mask_ends_at_the_first_of_several_stop_ids():
    ids = torch.tensor([[5, 7, 9, 2], [5, 2, 7, 9], [5, 6, 8, 8], [9, 5, 5, 5]])
    mask = completion_mask_from_stops(ids, (2, 9))
    assert mask.tolist() == [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_generation_stops_at_an_end_of_turn_that_is_not_the_eos(bos_tokenizer):
    """A model whose every next token is <|im_end|>: with it in generation_config.eos_token_id the completion is
    one token long; the tokenizer's EOS alone would let it run to max_new_tokens."""
    im_end = bos_tokenizer.convert_tokens_to_ids(IM_END)
    config = LlamaConfig(
        vocab_size=len(bos_tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        pad_token_id=bos_tokenizer.pad_token_id,
        eos_token_id=bos_tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    always = torch.full((len(bos_tokenizer),), -1e4)
    always[im_end] = 0.0
    model.lm_head.register_forward_hook(lambda module, args, logits: logits + always)
    for stops, length in (([im_end, bos_tokenizer.eos_token_id], 1), (bos_tokenizer.eos_token_id, 6)):
        model.generation_config = GenerationConfig(eos_token_id=stops, pad_token_id=bos_tokenizer.pad_token_id)
        policy = LMPolicy(model, bos_tokenizer)
        ro = policy.sample([MESSAGES, "hello"], max_new_tokens=6, temperature=1.0)
        assert ro.completion_mask.sum(dim=1).tolist() == [length, length]
        assert ro.truncated.tolist() == [length == 6] * 2
        assert ro.texts == ["", ""] or length == 6  # the end of turn is no text


@pytest.mark.slow  # builds and warm-starts chat-tiny from scratch: over a minute on 2 cores
@pytest.mark.timeout(600)
def test_chat_tiny_is_a_chat_model_between_the_pass_rate_bounds(model_cache):
    """The preset: Qwen2, BOS added by its tokenizer, <|im_end|> != EOS in generation_config, pass rate in [0.2, 0.8]
    on held-out word problems after the warm start, and it ends its turns (truncation well below 0.2)."""
    from transformers import AutoConfig

    from workers.models.loading import load_lm
    from workers.models.presets import preset_path

    folder = preset_path("chat-tiny", None, model_cache)
    meta = json.loads((folder / "groupscale-preset.json").read_text())
    assert 0.2 <= meta["warm_start_pass_rate"] <= 0.8 and meta["warm_start_truncation_rate"] < 0.2
    assert AutoConfig.from_pretrained(folder).model_type == "qwen2"
    policy = load_lm(folder)
    assert 350_000 < sum(p.numel() for p in policy.module.parameters()) < 450_000  # README: about 0.4M parameters
    tok = policy.tokenizer
    im_end = tok.convert_tokens_to_ids(IM_END)
    assert tok.eos_token_id != im_end and policy.stop_ids == (im_end, tok.eos_token_id)
    assert tok("x")["input_ids"][0] == tok.bos_token_id and tok.chat_template
    from workers.models.chat_tiny import pass_rate
    from workers.tasks.word_problems import word_problems

    torch.manual_seed(1)
    rate, truncation = pass_rate(policy, word_problems(128, 99))
    assert 0.15 <= rate <= 0.85 and truncation < 0.2


def test_chat_template_kwargs_reach_the_template(bos_tokenizer):
    """TRL's chat_template_kwargs (``enable_thinking: false`` of Qwen3-style templates) are template variables."""
    tok = build_chat_tokenizer(CORPUS, 300)
    tok.chat_template = (
        CHAT_TEMPLATE + "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}"
    )
    assert not PromptEncoder(tok).render(MESSAGES).endswith("</think>\n\n")
    rendered = PromptEncoder(tok, template_kwargs={"enable_thinking": False}).render(MESSAGES)
    assert rendered.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_sampling_ignores_the_sampling_fields_of_the_models_generation_config(tmp_path):
    """A folder whose generation_config.json sets repetition_penalty 2.0 and top_k 3 (as Qwen2.5-Instruct ships
    sampling fields) samples the same completions, at the same seed, as the folder without them; the fields it
    ignored are listed, and its stop ids still come from it."""
    from workers.models.loading import load_lm
    from workers.models.presets import tiny_llama

    tok = build_chat_tokenizer(CORPUS, 300)
    model = tiny_llama(tok, 0)
    with torch.no_grad():  # logits far from uniform, so that a repetition penalty changes the draws
        for p in model.parameters():
            p.normal_(0.0, 1.0)
    im_end = tok.convert_tokens_to_ids(IM_END)
    plain, shipped = tmp_path / "plain", tmp_path / "shipped"
    for folder, extra in (
        (plain, {}),
        (shipped, {"repetition_penalty": 2.0, "top_k": 3, "top_p": 0.8, "temperature": 0.7, "do_sample": True}),
    ):
        model.generation_config = GenerationConfig(
            bos_token_id=tok.bos_token_id, eos_token_id=[im_end, tok.eos_token_id], pad_token_id=tok.pad_token_id, **extra
        )
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    assert json.loads((shipped / "generation_config.json").read_text())["repetition_penalty"] == 2.0
    texts = []
    for folder in (plain, shipped):
        policy = load_lm(folder)
        torch.manual_seed(7)
        texts.append(policy.sample([MESSAGES] * 16, max_new_tokens=12, temperature=1.0).texts)
        assert policy.stop_ids == (im_end, tok.eos_token_id)
    assert texts[0] == texts[1] and len(set(texts[0])) > 4  # the same draws, and they vary
    assert policy.ignored_generation_config == {
        "repetition_penalty": 2.0,
        "top_k": 3,
        "top_p": 0.8,
        "temperature": 0.7,
        "do_sample": True,
    }
    assert load_lm(plain).ignored_generation_config == {}
