package postgres

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// ListReconcileCandidates returns up to p.Limit MERGED operations with a
// merge commit whose updated_at lies strictly inside (p.After, p.Before),
// ordered by project, target branch and age, each with its watermark
// verdict from deploy_confirmations (see RecordDeployConfirmation). One
// query, whatever the number of rows.
func (s *Store) ListReconcileCandidates(ctx context.Context, db store.DBTX, p store.ReconcileParams) ([]store.ReconcileCandidate, error) {
	rows, err := queries.ReconcileCandidates(ctx, q(db), &dbsqlc.ReconcileCandidatesParams{Status: store.StatusMerged,
		UpdatedAfter: p.After, UpdatedBefore: p.Before, Max: int32(min(p.Limit, math.MaxInt32))})
	if err != nil {
		return nil, fmt.Errorf("listing reconcile candidates: %w", err)
	}
	var out []store.ReconcileCandidate
	for _, r := range rows {
		op, err := fromRow(r.Operations)
		if err != nil {
			return nil, fmt.Errorf("listing reconcile candidates: %w", err)
		}
		out = append(out, store.ReconcileCandidate{Operation: op, Watermarked: r.Watermarked})
	}
	return out, nil
}

// RecordDeployConfirmation stores that c's deploy was confirmed now (at the
// store clock), raising the watermark of c's project and target branch.
// One row per MR; a later confirmation of the same MR moves its time
// forward, never back.
func (s *Store) RecordDeployConfirmation(ctx context.Context, db store.DBTX, c store.DeployConfirmation) error {
	err := queries.DeployConfirmationRecord(ctx, q(db), &dbsqlc.DeployConfirmationRecordParams{ProjectID: c.ProjectID,
		TargetBranch: c.TargetBranch, MrIid: c.MRIID, ConfirmedAt: s.Now()})
	if err != nil {
		return fmt.Errorf("recording deploy confirmation of !%d into %s: %w", c.MRIID, c.TargetBranch, err)
	}
	return nil
}

// prefixedOpColumns is opColumns qualified with the alias "o".
var prefixedOpColumns = func() string {
	cols := strings.Split(opColumns, ",")
	for i, c := range cols {
		c = strings.TrimSpace(c)
		switch {
		case strings.HasPrefix(c, "coalesce("):
			cols[i] = "coalesce(o." + strings.TrimPrefix(c, "coalesce(")
		case c == "'')":
			cols[i] = c
		default:
			cols[i] = "o." + c
		}
	}
	return strings.Join(cols, ", ")
}()

// WakeStaleWaits makes the scheduled polling job of up to p.Limit waiting
// operations due now, so that it reads GitLab at once instead of at its
// next (long) interval: what a lost webhook would have told us. It returns
// how many jobs it woke. One statement.
func (s *Store) WakeStaleWaits(ctx context.Context, db store.DBTX, p store.WakeParams) (int, error) {
	// Hand-written: it reads River's river_job table (not in our migrations,
	// so sqlc does not know it) through its JSON args.
	tag, err := q(db).Exec(ctx, `UPDATE river_job SET scheduled_at = $6 WHERE id IN (
			SELECT j.id FROM river_job j JOIN operations o ON o.id = j.args->>'operation_id'
			WHERE j.state = 'scheduled' AND j.kind = ANY($2) AND j.scheduled_at > $4
			  AND (j.args->>'step')::int = o.step AND o.step = ANY($1) AND o.updated_at < $3
			ORDER BY o.updated_at LIMIT $5 FOR UPDATE OF j SKIP LOCKED)`,
		p.Steps, p.Kinds, p.QuietBefore, p.WakeAfter, p.Limit, s.Now())
	if err != nil {
		return 0, fmt.Errorf("waking stale waits: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// PostponeStepJobs implements store.Jobs.
func (s *Store) PostponeStepJobs(ctx context.Context, db store.DBTX, operationID string, step int, kinds []string, until time.Time) (int, error) {
	// Hand-written: it writes River's river_job table (not in our
	// migrations, so sqlc does not know it) through its JSON args.
	tag, err := q(db).Exec(ctx, `UPDATE river_job SET scheduled_at = $4
		WHERE state = 'scheduled' AND kind = ANY($3) AND args->>'operation_id' = $1
		  AND (args->>'step')::int = $2 AND scheduled_at < $4`, operationID, step, kinds, until.UTC())
	if err != nil {
		return 0, fmt.Errorf("postponing the polls of %s: %w", operationID, err)
	}
	return int(tag.RowsAffected()), nil
}

// ListStuckOperations returns up to p.Limit operations at one of p.Steps,
// unchanged since p.QuietBefore, that have no live job (available, pending,
// scheduled, running or retryable) of one of p.Kinds for their current step.
// Oldest first. One query.
func (s *Store) ListStuckOperations(ctx context.Context, db store.DBTX, p store.StuckParams) ([]store.Operation, error) {
	// Hand-written: it reads River's river_job table (not in our migrations,
	// so sqlc does not know it) through its JSON args.
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+prefixedOpColumns+` FROM operations o
		WHERE o.step = ANY($1) AND o.updated_at < $3 AND NOT EXISTS (
			SELECT 1 FROM river_job j
			WHERE j.args->>'operation_id' = o.id AND (j.args->>'step')::int = o.step
			  AND j.kind = ANY($2)
			  AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable'))
		ORDER BY o.updated_at LIMIT $4`, p.Steps, p.Kinds, p.QuietBefore, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("listing stuck operations: %w", err)
	}
	return ops, nil
}

// ListWatchedMRs returns up to p.Limit operations at one of p.Steps that
// have a merge request, with ids after p.After, in id order (a keyset page:
// the caller passes the last id back to go on, "" to start over). One
// query.
func (s *Store) ListWatchedMRs(ctx context.Context, db store.DBTX, p store.WatchParams) ([]store.Operation, error) {
	ops, err := manyOperations(queries.OperationListWatched(ctx, q(db), &dbsqlc.OperationListWatchedParams{
		Statuses: p.Statuses, Steps: p.Steps, After: p.After, Max: int32(min(p.Limit, math.MaxInt32))}))
	if err != nil {
		return nil, fmt.Errorf("listing watched merge requests: %w", err)
	}
	return ops, nil
}
