"""`groupscale answer`: which G for a fraction of a grid's cost, as a family of methods with one typed result.

- ``methods``: the registry (``answer.method`` in the spec picks one; ``tracking`` by default);
- ``plan`` and ``cost``: how a budget of sampled completions is split and what each stage and the grid cost;
- ``combine`` and ``drift``: how the stages' measurements become an ``Answer`` (``result``);
- ``rivals``: TRL's default G and the pass-rate rule, with their regret.

Torch-free: workers.answers runs the stages on the real worker code.
"""

from sweeps.answer.cost import DEFAULT_FRACTION, eval_completions, grid_cost, grid_seconds, rung_cost, trial_cost
from sweeps.answer.methods import DEFAULT_METHOD, METHODS, AnswerMethod, get_method
from sweeps.answer.plan import AnswerPlan, BudgetTooSmall, Halving, Pilot, Probe, plan_answer
from sweeps.answer.result import Answer, Bound, Regret
from sweeps.answer.rivals import TRL_DEFAULT_G, passrate_group_size, regret
