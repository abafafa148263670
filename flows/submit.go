package flows

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"changebot/flows/rules"
	"changebot/internal/textcheck"
	"changebot/platform"
	"changebot/repoconfig"
	"changebot/store"
)

// SubmitParams is a change request (POST /api/v1/changes).
type SubmitParams struct {
	SubjectID string
	TargetKey string
	// Project names the project as the submitter spelled it: "group/repo"
	// (any case) or a numeric id. Submit replaces it with the path the
	// platform answers for it (path_with_namespace on GitLab, owner/name
	// on GitHub), the one spelling every settings lookup by project uses.
	Project      string
	TargetBranch string // empty: the project's default branch
	Title        string
	Description  string
	Files        []store.File
	RequestedBy  string // username of the requester on Platform
	// Platform is where the change goes: store.PlatformGitLab (also "") or
	// store.PlatformGitHub. Validate checks RequestedBy against its
	// username rules; Submit sets it to the engine's platform.
	Platform string
	// SubmittedBy names who submitted the change through the API (an id of
	// the API token, never the token itself); recorded as submitted_by on
	// the submitted event, it lets a submitter cancel its own changes.
	SubmittedBy string
	// IdempotencyKey, when set, makes a repeated submission return the
	// first one's operation.
	IdempotencyKey string
	// RolloutID, when set, makes the change one of a rollout (issue 25
	// point 3): the changes submitted with one rollout_id are read and
	// notified as one (store.ReadRollout, notify.Router.RolloutNotice).
	// Optional; the text rules of subject_id, at most
	// store.MaxRolloutIDChars characters.
	RolloutID string
	// ApprovalFirst is the flow order, read from the runtime setting
	// flow.approval_first at submit time and stored on the operation.
	ApprovalFirst bool
	// ApprovalFirstFunc, when set, decides ApprovalFirst (replacing it)
	// for the project's canonical path once the platform has answered for
	// it: the setting's project scope is the path the platform knows, not
	// the submitter's spelling.
	ApprovalFirstFunc func(project string) bool
	// MaxActive is admission control (setting admission.max_active, issue
	// 4 point 11): with this many active changes or more, Submit refuses
	// with ErrOverloaded and creates nothing. Zero means no limit.
	MaxActive int
}

// FieldError is one problem with a submitted field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every field problem of a submission.
type ValidationError struct{ Fields []FieldError }

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid change: " + strings.Join(parts, "; ")
}

// Limits of submitted fields, in characters (runes). Identifiers are stored
// and shown as they are, so they are kept to a line's length.
const (
	maxIDChars    = 255 // subject_id, target_key
	maxTitleChars = 255
	// maxUsernameChars is GitLab's limit of a username (User model,
	// validates :username, length: { maximum: 255 }).
	maxUsernameChars = 255
)

// gitlabUsername is GitLab's username format (Gitlab::PathRegex
// NAMESPACE_FORMAT_REGEX): letters, digits, '_', '-' and '.', not starting
// with '-', not ending with '.'; a name ending in .git or .atom is refused
// separately.
var gitlabUsername = regexp.MustCompile(`^(?:[a-zA-Z0-9_.][a-zA-Z0-9_.-]*[a-zA-Z0-9_-]|[a-zA-Z0-9_])$`)

// githubUsername is GitHub's username format: letters, digits and '-', not
// starting with '-', at most 39 characters (GitHub's sign-up form). Older
// accounts may hold a '-' at the end or two in a row, so those are accepted.
var githubUsername = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-]{0,38}$`)

// usernameProblem says why u is not a username of platform
// (store.PlatformGitHub, else GitLab's rules), or "" when it is one.
func usernameProblem(platform, u string) string {
	if platform == store.PlatformGitHub {
		if !githubUsername.MatchString(u) {
			return "must be a GitHub username (letters, digits and '-', not starting with '-', at most 39 characters)"
		}
		return ""
	}
	lower := strings.ToLower(u)
	if !gitlabUsername.MatchString(u) || strings.HasSuffix(lower, ".git") || strings.HasSuffix(lower, ".atom") {
		return "must be a GitLab username (letters, digits, '_', '-' and '.'; " +
			"not starting with '-', not ending with '.', '.git' or '.atom')"
	}
	return ""
}

// githubRepo is a GitHub repository's "owner/name": an account name
// (letters, digits, '-'; '_' for managed users) and a repository name
// (letters, digits, '.', '_', '-'), as GET /repos/{owner}/{repo} takes them.
var githubRepo = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,39}/[a-zA-Z0-9._-]{1,100}$`)

// projectProblem says what is wrong with project as a project of platform
// ("" when fine). On GitHub it must be "owner/name" or a repository's
// numeric id (platform/github's Client.Project reads no other); GitLab
// takes any path or id, which its checks then look up.
func projectProblem(platform, project string) string {
	if platform != store.PlatformGitHub {
		return ""
	}
	if githubRepo.MatchString(project) {
		return ""
	}
	if id, err := strconv.ParseInt(project, 10, 64); err == nil && id > 0 && project[0] != '+' {
		return ""
	}
	return `must be a GitHub repository as "owner/name" or a numeric id`
}

// textProblem says what is wrong with s as stored text: a NUL character
// (PostgreSQL text refuses it) or bytes that are not UTF-8; "" when fine.
func textProblem(s string) string {
	switch {
	case strings.ContainsRune(s, 0):
		return "contains a NUL character (\\u0000)"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}

// Validate checks every field and returns all problems at once, as a
// *ValidationError listing one problem per field: required fields, text
// that PostgreSQL or GitLab would refuse (NUL, invalid UTF-8), control and
// bidirectional formatting characters in every field but the description
// and the files' content (textcheck.Problem: shown on a page or a terminal
// they would read as other text than they are), lengths,
// requested_by as a username of p.Platform (GitLab's or GitHub's rules),
// project as one of p.Platform (on GitHub "owner/name" or a numeric id),
// file paths and actions, and a `.changebot.yml` at the repository's root
// against its schema (repoconfig.Parse: every problem with its line and
// key).
func (p SubmitParams) Validate() error {
	var errs []FieldError
	bad := map[string]bool{}
	add := func(field, msg string) {
		if !bad[field] {
			bad[field] = true
			errs = append(errs, FieldError{field, msg})
		}
	}
	text := func(field, v string, required bool, maxChars int) {
		if msg := textProblem(v); msg != "" {
			add(field, msg)
			return
		}
		if field != "description" {
			if msg := textcheck.Problem(v); msg != "" {
				add(field, msg)
				return
			}
		}
		if required && strings.TrimSpace(v) == "" {
			add(field, "is required")
		}
		if maxChars > 0 && utf8.RuneCountInString(v) > maxChars {
			add(field, fmt.Sprintf("is longer than %d characters", maxChars))
		}
	}
	text("subject_id", p.SubjectID, true, maxIDChars)
	text("target_key", p.TargetKey, true, maxIDChars)
	text("rollout_id", p.RolloutID, false, store.MaxRolloutIDChars)
	switch {
	case bad["rollout_id"] || p.RolloutID == "":
	case strings.TrimSpace(p.RolloutID) == "":
		add("rollout_id", "is blank; leave it out for a change of no rollout")
	case strings.ContainsAny(p.RolloutID, "/?#") || p.RolloutID == "." || p.RolloutID == "..":
		// It is a path segment of GET /api/v1/rollouts/{id} and the page.
		add("rollout_id", "must not contain '/', '?' or '#', nor be '.' or '..' (it is read back at /api/v1/rollouts/<rollout_id>)")
	}
	text("project", p.Project, true, 0)
	if !bad["project"] {
		if msg := projectProblem(p.Platform, p.Project); msg != "" {
			add("project", msg)
		}
	}
	text("target_branch", p.TargetBranch, false, 0)
	text("title", p.Title, true, maxTitleChars)
	text("description", p.Description, false, 0)
	text("requested_by", p.RequestedBy, true, maxUsernameChars)
	if u := p.RequestedBy; u != "" && !bad["requested_by"] {
		if msg := usernameProblem(p.Platform, u); msg != "" {
			add("requested_by", msg)
		}
	}
	if len(p.Files) == 0 {
		add("files", "at least one file is required")
	}
	seen := map[string]bool{}
	for i, f := range p.Files {
		field := fmt.Sprintf("files[%d].path", i)
		if msg := textProblem(f.Path); msg != "" {
			add(field, msg)
		} else if msg := checkPath(f.Path); msg != "" {
			add(field, msg)
		} else if seen[f.Path] {
			add(field, "is listed twice")
		}
		seen[f.Path] = true
		if msg := textProblem(f.Content); msg != "" {
			add(fmt.Sprintf("files[%d].content", i), msg+"; binary files are not supported")
		} else if f.Path == repoconfig.FileName && f.Action != "delete" {
			// The repository's policy file: a change must not bring an
			// invalid one to the target branch (issue 25 point 2).
			if _, err := repoconfig.Parse([]byte(f.Content)); err != nil {
				add(fmt.Sprintf("files[%d].content", i), "is not a valid "+repoconfig.FileName+": "+strings.TrimPrefix(err.Error(), "invalid "+repoconfig.FileName+": "))
			}
		}
		switch f.Action {
		case "", "create", "update", "delete":
		default:
			add(fmt.Sprintf("files[%d].action", i), "must be create, update or delete")
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

// checkPath refuses paths GitLab would refuse or that escape the
// repository: absolute, "..", empty segments, a backslash, control and
// bidirectional formatting characters (worded as textcheck.Problem), .git.
func checkPath(p string) string {
	switch {
	case p == "":
		return "is required"
	case strings.HasPrefix(p, "/"):
		return "must be relative to the repository root"
	case path.Clean(p) != p:
		return "must be a clean path (no '..', '.', '//' or trailing '/')"
	case strings.HasPrefix(p, "../") || p == "..":
		return "must stay inside the repository"
	case strings.ContainsAny(p, "\x00\r\n\\"):
		return "contains a forbidden character"
	}
	if r, kind, ok := textcheck.ForbiddenRune(p); ok {
		return textcheck.Describe(r, kind)
	}
	switch {
	case len(p) > 1024:
		return "is longer than 1024 bytes"
	case p == ".":
		return "must name a file"
	}
	for _, seg := range strings.Split(p, "/") {
		if strings.EqualFold(seg, ".git") {
			return "must not touch .git"
		}
	}
	return ""
}

// ErrActiveChange is returned by Submit when the binding has a change in
// progress (the API answers 409).
var ErrActiveChange = store.ErrActiveChange

// ErrOverloaded is returned by Submit when SubmitParams.MaxActive changes
// are active (the API answers 503 with Retry-After). The limit is a soft
// one: concurrent submissions may pass it by a few.
var ErrOverloaded = errors.New("too many active changes")

// admit enforces SubmitParams.MaxActive with one count query, and counts
// each refusal in changebot_admission_rejected_total.
func (e *Engine) admit(ctx context.Context, limit int) error {
	if limit <= 0 {
		return nil
	}
	n, err := e.st.CountActive(ctx, e.st.DB())
	if err != nil {
		return fmt.Errorf("checking admission: %w", err)
	}
	if n >= limit {
		e.m.admission.Inc()
		return fmt.Errorf("%w: %d active, limit %d (admission.max_active)", ErrOverloaded, n, limit)
	}
	return nil
}

// NewOperationID returns "op_" + a ULID.
func NewOperationID() string { return "op_" + ulid.Make().String() }

// Submit validates p (Validate, then admission, then checkGitLab: the
// project, the target branch and the files' actions, with reads only) and
// creates the operation, its binding, its first event and its first job in
// one transaction. It returns the operation and
// whether it was created now (false: the idempotency key was seen).
func (e *Engine) Submit(ctx context.Context, p SubmitParams) (store.Operation, bool, error) {
	p.Platform = e.platform
	if err := p.Validate(); err != nil {
		return store.Operation{}, false, err
	}
	if p.IdempotencyKey != "" {
		// A repeat answers from the database alone (no admission, no
		// GitLab): the change exists already.
		op, err := e.st.FindOperationByIdempotencyKey(ctx, e.st.DB(), p.IdempotencyKey)
		switch {
		case err == nil:
			return e.repeated(p, op)
		case !errors.Is(err, store.ErrNotFound):
			return store.Operation{}, false, err
		}
	}
	if err := e.admit(ctx, p.MaxActive); err != nil {
		return store.Operation{}, false, err
	}
	// The checks never wait for the call budget: what it holds back is
	// checked in the change's first job (issue 22 point 1).
	proj, deferred, err := e.checkGitLab(platform.WithoutBudgetWait(ctx), p)
	if err != nil {
		return store.Operation{}, false, err
	}
	asSubmitted := p.Project
	if proj.PathWithNamespace != "" {
		// The project as the platform names it: "101", "Platform/Config"
		// and "platform/config" are one project, so one settings scope
		// (approval policy, flow order, polling) and one key.
		p.Project = proj.PathWithNamespace
	}
	if p.ApprovalFirstFunc != nil {
		p.ApprovalFirst = p.ApprovalFirstFunc(p.Project)
	}
	branch := p.TargetBranch
	if branch == "" {
		branch = proj.DefaultBranch
	}
	// The approval provider of the branch's policy this replica knows (a
	// change of the branch read its .changebot.yml), where the server
	// lets the file set it.
	if e.policyFor(store.Operation{Project: p.Project, ProjectID: proj.ID, TargetBranch: branch}).Provider == rules.ProviderGitLab {
		// In-GitLab approval implies the MR exists before approval.
		p.ApprovalFirst = false
	}
	first := rules.ApprovalSending
	if !p.ApprovalFirst {
		first = rules.CreateStarted
	}
	op := store.Operation{
		ID: NewOperationID(), Platform: e.platform, SubjectID: p.SubjectID, TargetKey: p.TargetKey, Project: p.Project, ProjectID: proj.ID,
		TargetBranch: p.TargetBranch, Title: p.Title, Description: p.Description, Files: p.Files,
		RequestedBy: p.RequestedBy, ApprovalFirst: p.ApprovalFirst, Step: int(first),
		Status: rules.MustStep(first).Status, IdempotencyKey: p.IdempotencyKey, RolloutID: p.RolloutID,
	}
	op, created, err := e.st.CreateOperation(ctx, store.CreateParams{
		Operation: op,
		Event: store.EventParams{Type: store.EventSubmitted, Actor: p.RequestedBy, Source: "api",
			Payload: submittedPayload(p, asSubmitted, deferred)},
		Jobs: e.followUps(op, first, 1, 0),
	})
	if err != nil {
		return store.Operation{}, false, err
	}
	if !created {
		return e.repeated(p, op)
	}
	e.opLog(op).Info("change submitted", "subject_id", op.SubjectID, "target_key", op.TargetKey)
	return op, true, nil
}

// submittedPayload is the payload of a change's submitted event (schema
// version 2: "file_count" is the number of files; see
// store.EventSchemaVersion). "project" is the canonical path;
// "project_as_submitted" is the submitter's spelling when it differs.
func submittedPayload(p SubmitParams, asSubmitted string, deferred bool) map[string]any {
	payload := map[string]any{"project": p.Project, "file_count": len(p.Files), "approval_first": p.ApprovalFirst}
	if asSubmitted != p.Project {
		payload["project_as_submitted"] = asSubmitted
	}
	if p.SubmittedBy != "" {
		payload["submitted_by"] = p.SubmittedBy
	}
	if deferred {
		// The call budget was spent: the first job checks the change
		// against the platform (deferredChecks).
		payload["checks_deferred"] = true
	}
	return payload
}

// repeated answers a submission whose idempotency key was used for op: op
// itself when p asks for the same change, else an
// *IdempotencyConflictError.
func (e *Engine) repeated(p SubmitParams, op store.Operation) (store.Operation, bool, error) {
	if diff := p.differences(op); len(diff) > 0 {
		return store.Operation{}, false, &IdempotencyConflictError{Key: p.IdempotencyKey, OperationID: op.ID, Fields: diff}
	}
	return op, false, nil
}

// IdempotencyConflictError is returned by Submit when the idempotency key
// was used before for a change that differs from this submission: a
// repeated request must repeat the same change (the API answers 422).
type IdempotencyConflictError struct {
	// Key is the reused Idempotency-Key.
	Key string
	// OperationID is the change the key was first used for.
	OperationID string
	// Fields names the submitted fields that differ from that change.
	Fields []string
}

// Error implements error.
func (e *IdempotencyConflictError) Error() string {
	return fmt.Sprintf("Idempotency-Key %q was used for another change (%s); differing fields: %s",
		e.Key, e.OperationID, strings.Join(e.Fields, ", "))
}

// differences names the fields in which p differs from op, the change its
// idempotency key was first used for. The flow order is not compared: it
// comes from a setting, not from the request.
func (p SubmitParams) differences(op store.Operation) []string {
	var out []string
	for _, f := range []struct {
		name      string
		got, want string
	}{
		{"subject_id", p.SubjectID, op.SubjectID}, {"target_key", p.TargetKey, op.TargetKey},
		{"title", p.Title, op.Title},
		{"description", p.Description, op.Description}, {"requested_by", p.RequestedBy, op.RequestedBy},
		{"rollout_id", p.RolloutID, op.RolloutID},
	} {
		if f.got != f.want {
			out = append(out, f.name)
		}
	}
	// The operation keeps the project's canonical path (and its id): the
	// same project spelled as at first, in another case or by id matches.
	if !strings.EqualFold(p.Project, op.Project) && (op.ProjectID == 0 || p.Project != strconv.FormatInt(op.ProjectID, 10)) {
		out = append(out, "project")
	}
	// The create step fills in the default branch: an empty target_branch
	// matches whatever was chosen.
	if p.TargetBranch != "" && p.TargetBranch != op.TargetBranch {
		out = append(out, "target_branch")
	}
	if !slices.Equal(p.Files, op.Files) {
		out = append(out, "files")
	}
	return out
}

// IsValidation reports whether err is a *ValidationError.
func IsValidation(err error) (*ValidationError, bool) {
	var ve *ValidationError
	ok := errors.As(err, &ve)
	return ve, ok
}
