"""probes.kind: a probe row runs the probe or the budgeted answer (groupscale answer)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A database adopted from before migrations (create_all of newer models, then stamped 0001) may have it already.
    if "kind" in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("probes")}:
        return
    with op.batch_alter_table("probes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=16), server_default="probe", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("probes", schema=None) as batch_op:
        batch_op.drop_column("kind")
