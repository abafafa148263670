package postgres

import (
	"context"

	"changebot/store"
)

// The statements of this file are hand-written (the last valid repository
// policies, issue 25 point 2; migration 0022).

// RepoPolicySave implements store.RepoPolicyQueries: one upsert that
// keeps a row read later than p.
func (x executor) RepoPolicySave(ctx context.Context, p store.RepoPolicy) (bool, error) {
	tag, err := x.q.Exec(ctx, `INSERT INTO repo_policies (platform, project_id, branch, sha, body, read_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (platform, project_id, branch) DO UPDATE SET
			sha = excluded.sha, body = excluded.body, read_at = excluded.read_at
		WHERE repo_policies.read_at <= excluded.read_at`,
		p.Platform, p.ProjectID, p.Branch, p.SHA, p.Body, p.ReadAt)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// RepoPolicyGet implements store.RepoPolicyQueries.
func (x executor) RepoPolicyGet(ctx context.Context, platform string, projectID int64, branch string) (store.RepoPolicy, error) {
	p := store.RepoPolicy{Platform: platform, ProjectID: projectID, Branch: branch}
	err := x.q.QueryRow(ctx, `SELECT sha, body, read_at FROM repo_policies
		WHERE platform = $1 AND project_id = $2 AND branch = $3`, platform, projectID, branch).Scan(&p.SHA, &p.Body, &p.ReadAt)
	p.ReadAt = p.ReadAt.UTC()
	return p, noRows(err)
}
