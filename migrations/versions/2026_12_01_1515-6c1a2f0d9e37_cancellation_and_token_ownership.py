"""cancellation and token ownership: audits and batches may end ``cancelled``, and
record the API token that submitted them (per-token quotas, who may cancel).
(issue 13, Build item 3)

Revision ID: 6c1a2f0d9e37
Revises: 2104f5fdd41f
Create Date: 2026-12-01 15:15:00
"""
from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '6c1a2f0d9e37'
down_revision: str | None = '2104f5fdd41f'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "status IN ('queued', 'running', 'done', 'failed')"
NEW = "status IN ('queued', 'running', 'done', 'failed', 'cancelled')"


def upgrade() -> None:
    for table in ('audits', 'batches'):
        with op.batch_alter_table(table) as batch:  # SQLite: copy-and-move
            batch.drop_constraint(op.f(f'ck_{table}_status'), type_='check')
            batch.create_check_constraint(op.f(f'ck_{table}_status'), NEW)
            batch.add_column(sa.Column('token_id', sa.Integer(), nullable=True))
            batch.create_foreign_key(op.f(f'fk_{table}_token_id_api_tokens'), 'api_tokens',
                                     ['token_id'], ['id'], ondelete='SET NULL')
            batch.create_index(op.f(f'ix_{table}_token_id'), ['token_id'], unique=False)


def downgrade() -> None:
    for table in ('audits', 'batches'):
        op.execute(f"UPDATE {table} SET status = 'failed' WHERE status = 'cancelled'")
        with op.batch_alter_table(table) as batch:
            batch.drop_index(op.f(f'ix_{table}_token_id'))
            batch.drop_constraint(op.f(f'fk_{table}_token_id_api_tokens'), type_='foreignkey')
            batch.drop_column('token_id')
            batch.drop_constraint(op.f(f'ck_{table}_status'), type_='check')
            batch.create_check_constraint(op.f(f'ck_{table}_status'), OLD)
