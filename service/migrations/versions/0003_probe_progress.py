"""probes.progress: what a running probe or answer reported last (its stage, and the stages it went through)

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A database adopted from before migrations (create_all of newer models, then stamped 0001) may have it already.
    if "progress" in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("probes")}:
        return
    with op.batch_alter_table("probes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("progress", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("probes", schema=None) as batch_op:
        batch_op.drop_column("progress")
