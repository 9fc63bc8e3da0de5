"""work leases and worker heartbeats: audit scopes and batches carry a lease (owner,
expiry), dispatch and pick-up times and attempt counts; workers record heartbeats.
(issue 12: the database is the record of work, the reconciler re-dispatches lost work)

Revision ID: 2104f5fdd41f
Revises: 922b4bc8f286
Create Date: 2026-12-01 14:13:59.864088
"""
from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '2104f5fdd41f'
down_revision: str | None = '922b4bc8f286'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('worker_heartbeats',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_worker_heartbeats'))
    )
    op.add_column('audit_scopes', sa.Column('dispatched_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('audit_scopes', sa.Column('picked_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('audit_scopes', sa.Column('lease_owner', sa.String(length=200), nullable=True))
    op.add_column('audit_scopes', sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('audit_scopes', sa.Column('attempts', sa.Integer(), server_default='0', nullable=False))
    op.add_column('audit_scopes', sa.Column('lost_attempts', sa.Integer(), server_default='0', nullable=False))
    op.add_column('batches', sa.Column('dispatched_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('batches', sa.Column('lease_owner', sa.String(length=200), nullable=True))
    op.add_column('batches', sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column('batches', 'lease_expires_at')
    op.drop_column('batches', 'lease_owner')
    op.drop_column('batches', 'dispatched_at')
    op.drop_column('audit_scopes', 'lost_attempts')
    op.drop_column('audit_scopes', 'attempts')
    op.drop_column('audit_scopes', 'lease_expires_at')
    op.drop_column('audit_scopes', 'lease_owner')
    op.drop_column('audit_scopes', 'picked_at')
    op.drop_column('audit_scopes', 'dispatched_at')
    op.drop_table('worker_heartbeats')
