"""Writes train.parquet beside this file: chat word problems in TRL's conversational format.

Columns: ``prompt`` (a list of {role, content} messages) and ``solution`` (the integer answer as
text). Run ``python sweeps/examples/byo/make_dataset.py [N] [SEED] [OUT]`` to make another one.
"""

import sys
from pathlib import Path

from datasets import Dataset

from workers.tasks.word_problems import word_problems


def write(out: Path, n: int = 600, seed: int = 7) -> Path:
    rows = [{"prompt": p["prompt"], "solution": p["solution"]} for p in word_problems(n, seed)]
    Dataset.from_list(rows).to_parquet(str(out))
    return out


if __name__ == "__main__":
    n, seed = (int(sys.argv[1]) if len(sys.argv) > 1 else 600), (int(sys.argv[2]) if len(sys.argv) > 2 else 7)
    print(write(Path(sys.argv[3]) if len(sys.argv) > 3 else Path(__file__).with_name("train.parquet"), n, seed))
