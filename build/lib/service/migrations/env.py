"""Alembic environment of the controller store: run by service.store.migrate on the store's own connection.

The version table is ``groupscale_alembic_version``: Optuna's ``alembic_version`` lives in the same
database (adaptive sweeps, tune_lr studies) and tracks Optuna's own schema.
"""

from alembic import context

from service.store import VERSION_TABLE, Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
)  # SQLite alters tables by copying them
with context.begin_transaction():
    context.run_migrations()
