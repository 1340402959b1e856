"""The spec's ``task:`` section: the built-in tasks, a JSONL file, or your dataset with its rewards."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sweeps.spec.base import FUNCTION_PATTERN, REWARD_NAMES, JsonObject, StrictModel


class BuiltinRewardTaskSpec(StrictModel):
    """What every task spec says (DatasetTaskSpec has its own), for the tasks scored by a built-in reward: no label,
    rewards in [0, 1]; those that generate their problems (arithmetic, bandit) have no data files and an exact
    expected reward (teacher forcing; a sum over the bandit's arms)."""

    @property
    def exact_expected_reward(self) -> bool:
        """Whether the expected reward is computed exactly (here: always)."""
        return True

    @property
    def data_files(self) -> list[str]:
        """The files whose content is part of the task's identity (here: none, the task generates its problems)."""
        return []

    @property
    def label(self) -> None:
        """No label: the task's name is its label (DatasetTaskSpec has one)."""
        return None

    @property
    def max_reward(self) -> float:
        """The built-in rewards are in [0, 1]."""
        return 1.0


class ArithmeticTaskSpec(BuiltinRewardTaskSpec):
    """Prompts ``a+b=`` with 0 <= a, b <= max_operand; reward 1 for the exact sum, else 0."""

    name: Literal["arithmetic"]
    max_operand: int = Field(49, ge=9, le=999, description="largest operand (inclusive)")


class BanditTaskSpec(BuiltinRewardTaskSpec):
    """Tabular softmax contextual bandit with Bernoulli rewards (THEORY.md check instance: 20, 6, 0)."""

    name: Literal["bandit"]
    contexts: int = Field(20, ge=1, le=10_000, description="M, contexts (uniform)")
    arms: int = Field(6, ge=2, le=1_000, description="K, arms per context")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="numpy default_rng seed of logits and success rates")


class JsonlTaskSpec(BuiltinRewardTaskSpec):
    """Your data, the simple way: one {"prompt": ..., "answer": ...} object a line; a fixed share held out."""

    name: Literal["jsonl"]
    path: str = Field(..., min_length=1, max_length=4096, description="local .jsonl file")
    reward: Literal["exact_match", "numeric_match"] = "exact_match"
    eval_fraction: float = Field(0.2, gt=0, lt=1, description="share of lines held out for evaluation")

    @property
    def exact_expected_reward(self) -> bool:
        return self.reward == "exact_match"

    @property
    def data_files(self) -> list[str]:
        """The lines file (its content is part of the task's identity)."""
        return [self.path]


class RewardSpec(StrictModel):
    """One term of a dataset task's reward, times ``weight``: a built-in (``name``, comparing against
    ``answer_column``), a user function (``function: FILE.py:NAME``) or a reward server (``url``).

    A function is called by its trainer's convention (``convention``; ``auto``, the default, tells them apart by
    signature): ``trl`` (TRL's reward_funcs; with ``kwargs`` NAME is a factory, called once as ``NAME(**kwargs)``),
    ``verl`` (``compute_score(data_source, solution_str, ground_truth, extra_info)`` per completion, ``kwargs`` its
    reward_kwargs), ``openrlhf`` (``reward_func(queries, prompts, labels)``), ``easyr1`` (``compute_score(reward_inputs)``,
    ``kwargs`` its reward_function_kwargs) or ``verifiers`` (``load_environment(**kwargs)``'s rubric, or one rubric
    function). ``answer_column`` is the reference answer the convention passes (verl's ground_truth, OpenRLHF's
    labels, EasyR1's ground_truth, verifiers' answer). A reward server gets OpenRLHF's remote reward-model request
    (``request: openrlhf``) or TRL's arguments as JSON (``request: json``), see workers.rewards.http."""

    function: str | None = Field(
        None,
        max_length=4096,
        pattern=FUNCTION_PATTERN,
        description="FILE.py:NAME, FILE under the server's GROUPSCALE_REWARD_ROOT (a relative FILE is resolved against it)",
    )
    name: Literal["exact_match", "numeric_match", "math_verify"] | None = None
    url: str | None = Field(
        None, max_length=2048, pattern=r"^https?://[^\s/]+(/\S*)?$", description="a reward server's http(s) URL"
    )
    answer_column: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="the column with the answer, or a dotted path into a nested one: built-ins (default answer), "
        "verl (reward_model.ground_truth), openrlhf and request openrlhf (label), easyr1 and verifiers (answer)",
    )
    kwargs: JsonObject | None = Field(
        None,
        description="trl: the factory's arguments (NAME(**kwargs) gives the reward function); verl: reward_kwargs; "
        "openrlhf: further keyword arguments; easyr1: reward_function_kwargs; verifiers: load_environment's arguments",
    )
    convention: Literal["auto", "trl", "verl", "openrlhf", "easyr1", "verifiers", "http"] = Field(
        "auto",
        description="how a function is called: auto (told by its signature) or its trainer's convention; http: a "
        "reward server (url), which a url entry is under auto too",
    )
    solution_str: Literal["response", "prompt_and_response"] = Field(
        "response",
        description="verl: what solution_str holds; prompt_and_response for scorers that read the prompt and the "
        "response decoded together (TinyZero's countdown and multiply look for the answer after 'Assistant:')",
    )
    request: Literal["json", "openrlhf"] = Field(
        "json", description="url: the request's shape, TRL's arguments as JSON or OpenRLHF's {query, prompts, labels}"
    )
    timeout_s: float = Field(30.0, gt=0, le=3600, description="url: seconds to wait for each request's reply")
    retries: int = Field(3, ge=0, le=10, description="url: requests tried again after a failure (backoff 0.5 s, doubling)")
    batch_size: int | None = Field(None, ge=1, le=65536, description="url: completions per request (default: the batch)")
    weight: float = Field(1.0, ge=-1e6, le=1e6, description="the term's weight in the summed reward")

    @model_validator(mode="before")
    @classmethod
    def _old_default(cls, data: Any) -> Any:
        # Specs stored before answer_column became optional hold its old default on function entries too.
        if isinstance(data, dict) and data.get("function") and data.get("convention") == "trl":
            if data.get("answer_column") == "answer":
                data = {k: v for k, v in data.items() if k != "answer_column"}
        # Specs stored before convention: auto hold the old default, trl, on every entry: a built-in's is dropped.
        if isinstance(data, dict) and not data.get("function") and data.get("convention") == "trl":
            data = {k: v for k, v in data.items() if k != "convention"}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> RewardSpec:
        given = [f for f in ("function", "name", "url") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of function (FILE.py:NAME), name (one of: {', '.join(REWARD_NAMES)}) or url (a reward "
                f"server); got {', '.join(given) or 'none'}"
            )
        if self.convention == "http" and self.url is None:
            raise ValueError("convention http is a reward server's: give its url (and no function or name)")
        if self.function is None and (self.kwargs is not None or self.convention not in ("auto", "http")):
            raise ValueError(f"kwargs and convention belong to a function entry, not to {self.name or self.url!r}")
        changed = sorted(k for k, v in server_defaults().items() if getattr(self, k) != v)
        if self.url is None and changed:
            raise ValueError(f"{', '.join(changed)} belong to a reward server entry (url)")
        if self.solution_str != "response" and self.convention not in ("verl", "auto"):
            raise ValueError("solution_str belongs to convention: verl (verl's compute_score reads it)")
        if self.function is not None and self.convention == "trl" and self.answer_column is not None:
            raise ValueError(
                "answer_column belongs to built-ins and the conventions that pass a reference answer; a TRL-style "
                "function receives every column as a keyword argument"
            )
        if self.url is not None and self.request == "json" and self.answer_column is not None:
            raise ValueError("answer_column belongs to request: openrlhf (its labels); request json sends every column")
        return self


SERVER_FIELDS = ("request", "timeout_s", "retries", "batch_size")  # a reward server entry's own settings


def server_defaults() -> dict[str, Any]:
    """A reward server entry's settings at their defaults (RewardSpec's fields): the one place they are written."""
    return {k: RewardSpec.model_fields[k].default for k in SERVER_FIELDS}


DEFAULT_EVAL_FRACTION = 0.1


class DatasetTaskSpec(StrictModel):
    """Your task, the TRL way: a local dataset (file or save_to_disk folder) read with Hugging Face
    ``datasets``; ``prompt_column`` holds a string or chat messages; every other column goes to the
    reward functions with its row (TRL's convention). A string prompt reaches the model as ``prompt_format``
    says (formatted by ``prompt_template`` first); the reward functions see it as the data stores it."""

    name: Literal["dataset"]
    path: str = Field(
        ..., min_length=1, max_length=4096, description=".jsonl .json .parquet .csv .arrow file, or a save_to_disk folder"
    )
    split: str | None = Field(None, min_length=1, max_length=128, description="split of a save_to_disk DatasetDict folder")
    prompt_column: str = Field("prompt", min_length=1, max_length=256)
    prompt_format: Literal["auto", "chat", "raw"] = Field(
        "auto",
        description="how a string prompt reaches the model: chat (one user message through the model's chat template, "
        "add_generation_prompt; OpenRLHF's apply_chat_template, EasyR1, NeMo-RL, prime-rl), raw (the string as it is; "
        "TRL) or auto (chat where the model has a chat template, else raw); message-list prompts are always templated",
    )
    prompt_template: str | None = Field(
        None,
        min_length=1,
        max_length=4096,
        description="a file under GROUPSCALE_DATA_ROOT that formats a string prompt before templating: a .jinja file "
        "rendered with content (EasyR1's format_prompt), else text with one {} (NeMo-RL's prompt_file)",
    )
    eval_fraction: float | None = Field(None, gt=0, lt=1, description="share of rows held out (seeded); default 0.1")
    eval_path: str | None = Field(
        None, min_length=1, max_length=4096, description="held-out rows: a second dataset of the same shape"
    )
    label: str | None = Field(
        None,
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="name recommendations are filed under, with the content digest",
    )
    max_reward: float = Field(1.0, gt=0, le=1e6, description="best reward a completion can get (gap = max_reward - reward)")
    rewards: list[RewardSpec] = Field(..., min_length=1, max_length=16, description="summed, weighted")

    @model_validator(mode="after")
    def _one_eval_source(self) -> DatasetTaskSpec:
        if self.eval_fraction is not None and self.eval_path is not None:
            raise ValueError("give eval_fraction or eval_path, not both")
        return self

    @property
    def exact_expected_reward(self) -> bool:
        """One exact_match term: the expected reward is computed exactly by teacher forcing."""
        return len(self.rewards) == 1 and self.rewards[0].name == "exact_match"

    @property
    def data_files(self) -> list[str]:
        """The data file and the held-out one when given (their content is part of the task's identity)."""
        return [self.path, *([self.eval_path] if self.eval_path else [])]


TaskSpec = Annotated[ArithmeticTaskSpec | BanditTaskSpec | JsonlTaskSpec | DatasetTaskSpec, Field(discriminator="name")]
