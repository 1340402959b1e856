"""Synthetic chat word problems with short worked answers (the ``chat-tiny`` preset and the byo example).

Each problem is a conversational prompt (TRL's format: an optional system message and a user
message, of varying length), an integer ``solution`` and a worked ``completion`` such as
``"7 + 12 = 19 apples. #### 19"`` (about 15-20 tokens of the chat-tiny tokenizer). The
final answer follows ``####`` as in GSM8K, so ``numeric_match`` and TRL-style rewards read it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NAMES = ("Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Ivy", "Max", "Eli", "Ada", "Ben", "Kim")
ITEMS = ("apples", "pens", "books", "coins", "cards", "shells", "stamps", "cookies", "marbles", "stickers")
SYSTEM = (
    "You are a careful math tutor.",
    "Solve the problem. Show the calculation, then write #### and the final answer.",
    "Answer with one line of working and the final number after ####.",
)


def word_problem(rng: np.random.Generator) -> dict[str, Any]:
    """One problem: ``{"prompt": [messages], "solution": str, "completion": str}``."""
    name, item = NAMES[rng.integers(len(NAMES))], ITEMS[rng.integers(len(ITEMS))]
    kind = rng.integers(3)
    if kind == 0:
        a, b = (int(v) for v in rng.integers(1, 13, size=2))
        c, op = a + b, "+"
        question = rng.choice(
            [
                f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?",
                f"{name} had {a} {item}. A friend gave {name} {b} more {item}. How many {item} does {name} have?",
                f"There are {a} {item} in a box and {b} {item} on the table. How many {item} are there in all?",
            ]
        )
    elif kind == 1:
        a = int(rng.integers(3, 16))
        b = int(rng.integers(1, a))
        c, op = a - b, "-"
        question = rng.choice(
            [
                f"{name} has {a} {item} and gives away {b}. How many {item} are left?",
                f"{name} bought {a} {item} and lost {b} of them on the way home. How many {item} does {name} still have?",
            ]
        )
    else:
        a, b = (int(v) for v in rng.integers(2, 7, size=2))
        c, op = a * b, "*"
        question = rng.choice(
            [
                f"{name} buys {a} bags with {b} {item} in each bag. How many {item} does {name} buy?",
                f"There are {a} rows of {item} with {b} {item} in every row. How many {item} are there?",
            ]
        )
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": str(SYSTEM[rng.integers(len(SYSTEM))])})
    messages.append({"role": "user", "content": str(question)})
    return {"prompt": messages, "solution": str(c), "completion": f"{a} {op} {b} = {c} {item}. #### {c}"}


def word_problems(n: int, seed: int) -> list[dict[str, Any]]:
    """n problems from numpy ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return [word_problem(rng) for _ in range(n)]
