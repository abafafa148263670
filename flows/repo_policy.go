package flows

import (
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // git's blob id is SHA-1; it names the file, it protects nothing
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"changebot/platform"
	"changebot/repoconfig"
	"changebot/store"
	"changebot/templates"
)

// policyFiles is the platform read of a repository's policy file
// (platform/gitlab and platform/github: FileAt, GitLab GET
// /projects/:id/repository/files/:path/raw?ref=, GitHub GET
// /repos/{owner}/{repo}/contents/{path}?ref=). A platform without it
// governs every change by the server's settings alone.
type policyFiles interface {
	FileAt(ctx context.Context, projectID int64, path, ref string) ([]byte, error)
}

// repoPolicyStore is the store's side of the last valid policies (part of
// the store contract, store.RepoPolicies).
type repoPolicyStore interface {
	SaveRepoPolicy(ctx context.Context, db store.DBTX, p store.RepoPolicy) (bool, error)
	RepoPolicy(ctx context.Context, db store.DBTX, platform string, projectID int64, branch string) (store.RepoPolicy, error)
}

// Governing is the repository policy that governs the changes of one
// target branch (issue 25 point 2): the `.changebot.yml` read from the
// branch when a change starts, or, while the branch holds an invalid one,
// the last valid file stored for it (store.RepoPolicy). The zero value is
// "no file": the server's settings govern alone.
type Governing struct {
	// Policy is the governing file's policy (zero when none governs).
	Policy repoconfig.Policy
	// Blob is the governing file's git blob id (what `git hash-object
	// .changebot.yml` prints for it), "" when no file governs.
	Blob string
	// Invalid is the branch's current file when it is not valid (and so
	// does not govern); InvalidBlob its blob id.
	Invalid     *repoconfig.InvalidError
	InvalidBlob string
}

// payload is the policy as recorded on the event of the move that read it
// (key "policy"), from which the status comment says which file governs.
func (g Governing) payload() map[string]any {
	out := map[string]any{"blob": g.Blob}
	if g.Invalid != nil {
		problems := make([]string, len(g.Invalid.Problems))
		for i, p := range g.Invalid.Problems {
			problems[i] = p.String()
		}
		out["invalid_blob"], out["problems"] = g.InvalidBlob, problems
	}
	return out
}

// repoPolicies keeps, per (project id, target branch), the policy that
// governs the branch's changes on this replica: read from the platform at
// most once per projectReadTTL when a change starts (readPolicy), or
// loaded from the store once when a job meets a branch this replica has
// not read (knowPolicy). One entry per branch, never per change.
type repoPolicies struct {
	mu sync.Mutex
	m  map[policyKey]cachedPolicy
}

type policyKey struct {
	projectID int64
	branch    string
}

type cachedPolicy struct {
	g Governing
	// readAt is when the platform was last read for the branch (the
	// engine's clock); zero when the entry came from the store alone.
	readAt time.Time
}

func (r *repoPolicies) get(k policyKey) (cachedPolicy, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.m[k]
	return c, ok
}

func (r *repoPolicies) put(k policyKey, c cachedPolicy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[policyKey]cachedPolicy{}
	}
	r.m[k] = c
}

// gitBlobID is git's object id of a blob holding data: the SHA-1 of
// "blob <size>\x00" and the data.
func gitBlobID(data []byte) string {
	h := sha1.New() //nolint:gosec // see the import
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// readPolicy returns the policy governing op's target branch as the
// platform holds it now (one read of `.changebot.yml` at the branch, shared
// by the branch's changes for projectReadTTL): a valid file is stored as
// the branch's last valid one and governs; an invalid one governs nothing,
// the last valid one stored does (Governing.Invalid says so); no file
// means the server's settings govern. It is called when a change starts
// (its first job), before it opens anything.
func (e *Engine) readPolicy(ctx context.Context, op store.Operation, projectID int64, branch string) (Governing, error) {
	files, ok := e.gl.(policyFiles)
	if !ok || projectID == 0 || branch == "" {
		return Governing{}, nil
	}
	k := policyKey{projectID, branch}
	if c, ok := e.policies.get(k); ok && !c.readAt.IsZero() && e.now().Sub(c.readAt) < projectReadTTL {
		return c.g, nil
	}
	data, err := files.FileAt(ctx, projectID, repoconfig.FileName, branch)
	if errors.Is(err, platform.ErrNotFound) {
		e.policies.put(k, cachedPolicy{readAt: e.now()})
		return Governing{}, nil
	}
	if err != nil {
		return Governing{}, fmt.Errorf("reading %s of branch %q: %w", repoconfig.FileName, branch, err)
	}
	g := Governing{Blob: gitBlobID(data)}
	pol, perr := repoconfig.Parse(data)
	var invalid *repoconfig.InvalidError
	switch {
	case perr == nil:
		g.Policy = pol
		if _, err := e.repoStore().SaveRepoPolicy(ctx, e.st.DB(), store.RepoPolicy{Platform: store.PlatformOr(op.Platform),
			ProjectID: projectID, Branch: branch, SHA: g.Blob, Body: string(data)}); err != nil {
			return Governing{}, err
		}
	case errors.As(perr, &invalid):
		g = e.lastValid(ctx, op, projectID, branch)
		g.Invalid, g.InvalidBlob = invalid, gitBlobID(data)
		e.opLog(op).Warn("the branch's policy file is invalid; the last valid one governs",
			"branch", branch, "blob", g.InvalidBlob, "governing_blob", g.Blob, "err", perr)
	default:
		return Governing{}, perr
	}
	e.policies.put(k, cachedPolicy{g: g, readAt: e.now()})
	return g, nil
}

// policyMatters reports whether op's project lets its `.changebot.yml`
// govern anything: the server lists keys it may set
// (policy.allow_override) or adopts developers' merge requests there
// (whose bindings come from its path rules). Elsewhere the file is never
// read: a change costs no call for a policy that could not apply.
func (e *Engine) policyMatters(op store.Operation) bool { return e.PolicyMatters(op.Project) }

// PolicyMatters is policyMatters for project (its path): also where a
// developer's merge request's `.changebot.yml` is checked. It makes no
// call.
func (e *Engine) PolicyMatters(project string) bool {
	return (e.cfg.AllowOverrideFunc != nil && len(e.cfg.AllowOverrideFunc(project)) > 0) || e.cfg.Adopt.Allows(project)
}

// lastValid is the last valid policy stored for the branch, or none.
func (e *Engine) lastValid(ctx context.Context, op store.Operation, projectID int64, branch string) Governing {
	row, err := e.repoStore().RepoPolicy(ctx, e.st.DB(), store.PlatformOr(op.Platform), projectID, branch)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.opLog(op).Warn("reading the last valid policy failed; the server's settings govern", "err", err)
		}
		return Governing{}
	}
	pol, err := repoconfig.Parse([]byte(row.Body))
	if err != nil {
		// Stored only when valid; a file valid under an older schema
		// that this version refuses governs nothing.
		e.opLog(op).Warn("the stored policy no longer parses; the server's settings govern", "blob", row.SHA, "err", err)
		return Governing{}
	}
	return Governing{Policy: pol, Blob: row.SHA}
}

// knowPolicy makes sure this replica knows the policy of op's branch
// before one of op's jobs runs: a branch it never read is loaded from the
// store once (no platform call). A failure is logged, and the server's
// settings govern meanwhile.
func (e *Engine) knowPolicy(ctx context.Context, op store.Operation) {
	if op.ProjectID == 0 || op.TargetBranch == "" {
		return
	}
	if _, ok := e.gl.(policyFiles); !ok || !e.policyMatters(op) {
		return
	}
	k := policyKey{op.ProjectID, op.TargetBranch}
	if _, ok := e.policies.get(k); ok {
		return
	}
	e.policies.put(k, cachedPolicy{g: e.lastValid(ctx, op, op.ProjectID, op.TargetBranch)})
}

// repoStore is the engine's store as a repoPolicyStore.
func (e *Engine) repoStore() repoPolicyStore { return e.st }

// governing is the policy this replica knows for op's branch (zero when
// none).
func (e *Engine) governing(op store.Operation) Governing {
	c, _ := e.policies.get(policyKey{op.ProjectID, op.TargetBranch})
	return c.g
}

// overrides reports whether the repository's value of key replaces the
// server's setting for project: the server lists the key in the project's
// policy.allow_override (EngineConfig.AllowOverrideFunc).
func (e *Engine) overrides(project, key string) bool {
	return e.cfg.AllowOverrideFunc != nil && slices.Contains(e.cfg.AllowOverrideFunc(project), key)
}

// Keys of `.changebot.yml` a server may let override its settings
// (settings.OverridableKeys names the same keys).
const (
	keyApprovalProvider  = "approval.provider"
	keyApprovalApprovers = "approval.approvers"
	keyApprovalRequired  = "approval.required"
	keyQueueMode         = "queue.mode"
	keyQueueDeferCI      = "queue.defer_ci"
	keyQueueRetries      = "queue.pipeline_retries"
	keyMergeMaxRounds    = "merge.max_rounds"
	keyNotify            = "notify"
)

// FileRoutes are the notification routes of the `.changebot.yml` that
// governs op's branch, when the server lets the project's file set them
// (policy.allow_override lists `notify`); nil otherwise. They are read
// from this replica's memory, without I/O, as the move's notifications
// are made in its transaction (notify.Router.JobsRouted).
func (e *Engine) FileRoutes(op store.Operation) []repoconfig.Route {
	routes := e.governing(op).Policy.Notify
	if len(routes) == 0 || !e.overrides(op.Project, keyNotify) {
		return nil
	}
	return routes
}

// applyQueuePolicy lays the governing file's queue values the server
// allows over c.
func (e *Engine) applyQueuePolicy(op store.Operation, c QueueConfig) QueueConfig {
	q := e.governing(op).Policy.Queue
	if q == nil {
		return c
	}
	if q.Mode != "" && e.overrides(op.Project, keyQueueMode) {
		c.Mode = q.Mode
	}
	if q.DeferCI != "" && e.overrides(op.Project, keyQueueDeferCI) {
		c.DeferCI = q.DeferCI
	}
	if q.PipelineRetries != nil && e.overrides(op.Project, keyQueueRetries) {
		c.PipelineRetries = *q.PipelineRetries
		if c.PipelineRetries == 0 {
			c.PipelineRetries = -1 // QueueConfig: negative means none
		}
	}
	return c
}

// applyPollPolicy lays the governing file's merge.max_rounds over p when
// the server allows it.
func (e *Engine) applyPollPolicy(op store.Operation, p PollConfig) PollConfig {
	if m := e.governing(op).Policy.Merge; m != nil && m.MaxRounds > 0 && e.overrides(op.Project, keyMergeMaxRounds) {
		p.MaxRounds = m.MaxRounds
	}
	return p
}

// applyApprovalPolicy lays the governing file's approval values the
// server allows over p.
func (e *Engine) applyApprovalPolicy(op store.Operation, p ApprovalPolicy) ApprovalPolicy {
	a := e.governing(op).Policy.Approval
	if a == nil {
		return p
	}
	if a.Provider != "" && e.overrides(op.Project, keyApprovalProvider) {
		p.Provider = a.Provider
	}
	if a.Approvers != nil && e.overrides(op.Project, keyApprovalApprovers) {
		p.Approvers = slices.Clone(a.Approvers)
	}
	if a.Required > 0 && e.overrides(op.Project, keyApprovalRequired) {
		p.Required = a.Required
	}
	return p
}

// policyRecord is the "policy" key of an event's payload (Governing.payload).
type policyRecord struct {
	Policy *struct {
		Blob        string   `json:"blob"`
		InvalidBlob string   `json:"invalid_blob"`
		Problems    []string `json:"problems"`
	} `json:"policy"`
}

// policyView is the status comment's line about the governing policy,
// from the newest event that recorded one (payload "policy", written by
// the move of the change's first job): nil when the change's branch holds
// no file.
func policyView(events []store.Event) *templates.PolicyView {
	for i := len(events) - 1; i >= 0; i-- {
		var rec policyRecord
		if !bytes.Contains(events[i].Payload, []byte(`"policy"`)) || json.Unmarshal(events[i].Payload, &rec) != nil || rec.Policy == nil {
			continue
		}
		p := rec.Policy
		if p.Blob == "" && p.InvalidBlob == "" {
			return nil
		}
		v := &templates.PolicyView{Blob: short(p.Blob), InvalidBlob: short(p.InvalidBlob)}
		if len(p.Problems) > 0 {
			v.Problem, v.More = p.Problems[0], len(p.Problems)-1
		}
		return v
	}
	return nil
}
