package flows

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"changebot/store"
)

// SubmitParams is a change request (POST /api/v1/changes).
type SubmitParams struct {
	SubjectID    string
	TargetKey    string
	Project      string // "group/repo" or a numeric id
	TargetBranch string // empty: the project's default branch
	Title        string
	Description  string
	Files        []store.File
	RequestedBy  string // GitLab username of the requester
	// IdempotencyKey, when set, makes a repeated submission return the
	// first one's operation.
	IdempotencyKey string
	// ApprovalFirst is the flow order, read from the runtime setting
	// flow.approval_first at submit time and stored on the operation.
	ApprovalFirst bool
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

// Validate checks every field and returns all problems at once.
func (p SubmitParams) Validate() error {
	var errs []FieldError
	req := func(field, v string) {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, FieldError{field, "is required"})
		}
	}
	req("subject_id", p.SubjectID)
	req("target_key", p.TargetKey)
	req("project", p.Project)
	req("title", p.Title)
	req("requested_by", p.RequestedBy)
	if utf8.RuneCountInString(p.Title) > 255 {
		errs = append(errs, FieldError{"title", "is longer than 255 characters"})
	}
	if len(p.Files) == 0 {
		errs = append(errs, FieldError{"files", "at least one file is required"})
	}
	seen := map[string]bool{}
	for i, f := range p.Files {
		field := fmt.Sprintf("files[%d].path", i)
		if msg := checkPath(f.Path); msg != "" {
			errs = append(errs, FieldError{field, msg})
		} else if seen[f.Path] {
			errs = append(errs, FieldError{field, "is listed twice"})
		}
		seen[f.Path] = true
		switch f.Action {
		case "", "create", "update", "delete":
		default:
			errs = append(errs, FieldError{fmt.Sprintf("files[%d].action", i), "must be create, update or delete"})
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

// checkPath refuses paths GitLab would refuse or that escape the
// repository: absolute, "..", empty segments, control characters, .git.
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
	n, err := e.st.CountActive(ctx, e.st.Pool())
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

// Submit validates p and creates the operation, its binding, its first
// event and its first job in one transaction. It returns the operation and
// whether it was created now (false: the idempotency key was seen).
func (e *Engine) Submit(ctx context.Context, p SubmitParams) (store.Operation, bool, error) {
	if err := p.Validate(); err != nil {
		return store.Operation{}, false, err
	}
	if e.policy(p.Project).Provider == ProviderGitLab {
		// In-GitLab approval implies the MR exists before approval.
		p.ApprovalFirst = false
	}
	if err := e.admit(ctx, p.MaxActive); err != nil {
		return store.Operation{}, false, err
	}
	first := ApprovalSending
	if !p.ApprovalFirst {
		first = CreateStarted
	}
	op := store.Operation{
		ID: NewOperationID(), SubjectID: p.SubjectID, TargetKey: p.TargetKey, Project: p.Project,
		TargetBranch: p.TargetBranch, Title: p.Title, Description: p.Description, Files: p.Files,
		RequestedBy: p.RequestedBy, ApprovalFirst: p.ApprovalFirst, Step: int(first),
		Status: MustStep(first).Status, IdempotencyKey: p.IdempotencyKey,
	}
	op, created, err := e.st.CreateOperation(ctx, store.CreateParams{
		Operation: op,
		Event: store.EventParams{Type: store.EventSubmitted, Actor: p.RequestedBy, Source: "api",
			Payload: map[string]any{"project": p.Project, "files": len(p.Files), "approval_first": p.ApprovalFirst}},
		Jobs: e.followUps(op, first, 1, 0),
	})
	if err != nil {
		return store.Operation{}, false, err
	}
	if created {
		e.opLog(op).Info("change submitted", "subject_id", op.SubjectID, "target_key", op.TargetKey)
	}
	return op, created, nil
}

// IsValidation reports whether err is a *ValidationError.
func IsValidation(err error) (*ValidationError, bool) {
	var ve *ValidationError
	ok := errors.As(err, &ve)
	return ve, ok
}
