"""sweeps.spec, probes.spec: a dataset task stored before task.prompt_format keeps its string prompts raw

A dataset task's string prompts went to the model as they were until task.prompt_format came, whose default (auto)
now renders them through the model's chat template; a stored spec without the field gets ``prompt_format: raw``, so a
sweep or probe resumed after the upgrade trains and measures what it did before.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLES = ("sweeps", "probes")  # the rows that hold a SweepSpec (service.store: Sweep.spec, Probe.spec)
FIELDS = ("prompt_format", "prompt_template")


def _rewrite(change) -> None:
    """Each stored spec whose dataset task ``change(task)`` gives another task, written back with it."""
    bind = op.get_bind()
    for name in TABLES:
        table = sa.table(name, sa.column("id", sa.String), sa.column("spec", sa.JSON))
        for row_id, spec in bind.execute(sa.select(table.c.id, table.c.spec)).all():
            task = (spec or {}).get("task")
            if not isinstance(task, dict) or task.get("name") != "dataset":
                continue
            new = change(task)
            if new != task:
                bind.execute(sa.update(table).where(table.c.id == row_id).values(spec={**spec, "task": new}))


def upgrade() -> None:
    _rewrite(lambda task: task if "prompt_format" in task else {**task, "prompt_format": "raw"})


def downgrade() -> None:
    # the older code refuses the fields (its spec forbids unknown keys); a spec that chose chat loses that choice
    _rewrite(lambda task: {k: v for k, v in task.items() if k not in FIELDS})
