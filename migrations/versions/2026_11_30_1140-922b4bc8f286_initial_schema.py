"""initial schema: programs, datasets, audits, scopes, fits, comparisons, batches, tokens, events

Revision ID: 922b4bc8f286
Revises: 
Create Date: 2026-11-30 11:40:43.539612
"""
from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '922b4bc8f286'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    op.create_table('batches',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('source', sa.String(length=32), nullable=False),
    sa.Column('posteriors', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('settings', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('summary', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name=op.f('ck_batches_status')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_batches'))
    )
    op.create_index(op.f('ix_batches_status'), 'batches', ['status'], unique=False)
    op.create_table('datasets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_datasets')),
    sa.UniqueConstraint('sha256', name=op.f('uq_datasets_sha256'))
    )
    op.create_table('programs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('language', sa.String(length=16), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_programs')),
    sa.UniqueConstraint('sha256', name=op.f('uq_programs_sha256'))
    )
    op.create_table('audits',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('error', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('pymc_program_id', sa.Integer(), nullable=False),
    sa.Column('lazyppl_program_id', sa.Integer(), nullable=False),
    sa.Column('parameters', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('settings', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('evidence', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('timings', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('source', sa.String(length=32), nullable=False),
    sa.Column('posterior', sa.String(length=200), nullable=True),
    sa.Column('batch_id', sa.Uuid(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name=op.f('ck_audits_status')),
    sa.CheckConstraint("verdict IS NULL OR verdict IN ('agree', 'inconclusive', 'disagree', 'error')", name=op.f('ck_audits_verdict')),
    sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], name=op.f('fk_audits_batch_id_batches'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['lazyppl_program_id'], ['programs.id'], name=op.f('fk_audits_lazyppl_program_id_programs')),
    sa.ForeignKeyConstraint(['pymc_program_id'], ['programs.id'], name=op.f('fk_audits_pymc_program_id_programs')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audits')),
    sa.UniqueConstraint('batch_id', 'posterior', name=op.f('uq_audits_batch_id_posterior'))
    )
    op.create_index(op.f('ix_audits_batch_id'), 'audits', ['batch_id'], unique=False)
    op.create_index(op.f('ix_audits_created_at'), 'audits', ['created_at'], unique=False)
    op.create_index(op.f('ix_audits_status'), 'audits', ['status'], unique=False)
    op.create_index(op.f('ix_audits_verdict'), 'audits', ['verdict'], unique=False)
    op.create_table('audit_scopes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('audit_id', sa.Uuid(), nullable=False),
    sa.Column('scope', sa.String(length=100), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['audit_id'], ['audits.id'], name=op.f('fk_audit_scopes_audit_id_audits'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_audit_scopes_dataset_id_datasets')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_scopes')),
    sa.UniqueConstraint('audit_id', 'scope', name=op.f('uq_audit_scopes_audit_id_scope'))
    )
    op.create_table('comparisons',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('audit_id', sa.Uuid(), nullable=False),
    sa.Column('scope', sa.String(length=100), nullable=False),
    sa.Column('pair', sa.String(length=32), nullable=False),
    sa.Column('parameter', sa.String(length=200), nullable=False),
    sa.Column('d', sa.Double(), nullable=True),
    sa.Column('d_lo', sa.Double(), nullable=True),
    sa.Column('d_hi', sa.Double(), nullable=True),
    sa.Column('r', sa.Double(), nullable=True),
    sa.Column('r_lo', sa.Double(), nullable=True),
    sa.Column('r_hi', sa.Double(), nullable=True),
    sa.Column('verdict', sa.String(length=16), nullable=False),
    sa.Column('detail', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.CheckConstraint("verdict IN ('agree', 'inconclusive', 'disagree', 'error')", name=op.f('ck_comparisons_verdict')),
    sa.ForeignKeyConstraint(['audit_id'], ['audits.id'], name=op.f('fk_comparisons_audit_id_audits'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_comparisons')),
    sa.UniqueConstraint('audit_id', 'scope', 'pair', 'parameter', name=op.f('uq_comparisons_audit_id_scope_pair_parameter'))
    )
    op.create_table('events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('audit_id', sa.Uuid(), nullable=True),
    sa.Column('batch_id', sa.Uuid(), nullable=True),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('from_status', sa.String(length=16), nullable=True),
    sa.Column('to_status', sa.String(length=16), nullable=True),
    sa.Column('message', sa.Text(), nullable=True),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['audit_id'], ['audits.id'], name=op.f('fk_events_audit_id_audits'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], name=op.f('fk_events_batch_id_batches'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events'))
    )
    op.create_index(op.f('ix_events_audit_id'), 'events', ['audit_id'], unique=False)
    op.create_index(op.f('ix_events_batch_id'), 'events', ['batch_id'], unique=False)
    op.create_table('fits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('audit_id', sa.Uuid(), nullable=False),
    sa.Column('scope', sa.String(length=100), nullable=False),
    sa.Column('language', sa.String(length=16), nullable=False),
    sa.Column('look', sa.Integer(), nullable=False),
    sa.Column('chains', sa.Integer(), nullable=False),
    sa.Column('draws_per_chain', sa.Integer(), nullable=False),
    sa.Column('draws', sa.LargeBinary(), nullable=False),
    sa.Column('summary', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['audit_id'], ['audits.id'], name=op.f('fk_fits_audit_id_audits'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_fits')),
    sa.UniqueConstraint('audit_id', 'scope', 'language', 'look', name=op.f('uq_fits_audit_id_scope_language_look'))
    )
    op.create_table('scope_results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('audit_id', sa.Uuid(), nullable=False),
    sa.Column('scope', sa.String(length=100), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=False),
    sa.Column('evidence', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('seconds', sa.Double(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("verdict IN ('agree', 'inconclusive', 'disagree', 'error')", name=op.f('ck_scope_results_verdict')),
    sa.ForeignKeyConstraint(['audit_id'], ['audits.id'], name=op.f('fk_scope_results_audit_id_audits'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_scope_results')),
    sa.UniqueConstraint('audit_id', 'scope', name=op.f('uq_scope_results_audit_id_scope'))
    )


def downgrade() -> None:
    op.drop_table('scope_results')
    op.drop_table('fits')
    op.drop_index(op.f('ix_events_batch_id'), table_name='events')
    op.drop_index(op.f('ix_events_audit_id'), table_name='events')
    op.drop_table('events')
    op.drop_table('comparisons')
    op.drop_table('audit_scopes')
    op.drop_index(op.f('ix_audits_verdict'), table_name='audits')
    op.drop_index(op.f('ix_audits_status'), table_name='audits')
    op.drop_index(op.f('ix_audits_created_at'), table_name='audits')
    op.drop_index(op.f('ix_audits_batch_id'), table_name='audits')
    op.drop_table('audits')
    op.drop_table('programs')
    op.drop_table('datasets')
    op.drop_index(op.f('ix_batches_status'), table_name='batches')
    op.drop_table('batches')
    op.drop_table('api_tokens')
