"""A reward function the way TRL's GRPOTrainer takes it (``reward_funcs=[accuracy]``).

groupscale calls it with the same keyword arguments: ``prompts``, ``completions`` (chat messages,
since the dataset's prompts are conversational), ``completion_ids``, ``trainer_state`` and every
other dataset column, here ``solution``. It returns one float (or None to abstain) per completion.
"""

import re

ANSWER = re.compile(r"####\s*(-?\d+)")


def accuracy(completions, solution, **kwargs):
    """1.0 when the number after the last #### equals the solution, else 0.0; None without a ####."""
    rewards = []
    for completion, truth in zip(completions, solution):
        found = ANSWER.findall(completion[0]["content"])
        rewards.append(None if not found else float(found[-1] == str(truth).strip()))
    return rewards
