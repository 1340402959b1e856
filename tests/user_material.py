"""Users' material for the tests: the reward files under tests/fixtures/user_material and datasets of TRL's and verl's shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset

from workers.tasks.word_problems import word_problem

REWARDS = Path(__file__).resolve().parent / "fixtures" / "user_material" / "rewards"


def word_problem_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """TRL's conversational format: ``{"prompt": [messages], "solution": str}`` (what chat-tiny was warm-started on)."""
    rng = np.random.default_rng(seed)
    return [{k: v for k, v in word_problem(rng).items() if k != "completion"} for _ in range(n)]


def verl_rows(n: int, seed: int = 0, split: str = "train") -> list[dict[str, Any]]:
    """The rows verl's ``examples/data_preprocess/gsm8k.py`` writes: data_source, prompt (messages), ability,
    reward_model {style, ground_truth} and extra_info {split, index, answer, question}. The prompts are chat-tiny's
    word problems as they are (verl's script appends an instruction, which that tiny model has never read)."""
    rows = []
    for i, problem in enumerate(word_problem_rows(n, seed)):
        question = problem["prompt"][-1]["content"]
        rows.append(
            {
                "data_source": "openai/gsm8k",
                "prompt": problem["prompt"],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": problem["solution"]},
                "extra_info": {"split": split, "index": i, "answer": f"#### {problem['solution']}", "question": question},
            }
        )
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    Dataset.from_list(rows).to_parquet(str(path))
    return path
