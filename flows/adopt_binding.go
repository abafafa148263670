package flows

import (
	"context"
	"errors"
	"fmt"

	"changebot/repoconfig"
	"changebot/store"
)

// changedPaths is the platform read of the paths a merge request changes
// (platform/gitlab and platform/github ChangedPaths; both fakes).
type changedPaths interface {
	ChangedPaths(ctx context.Context, projectID, iid int64) ([]string, error)
}

// repoBindings is the engine's BindingDeriver (AdoptConfig.Bindings nil):
// the path rules of the policy that governs the merge request's target
// branch (readPolicy: the branch's `.changebot.yml`, or its last valid one
// while the branch's is invalid) over the paths the merge request changes
// (repoconfig.Policy.Binding). At most two reads per adoption, one of them
// shared by the branch's changes for a minute.
type repoBindings struct{ e *Engine }

// AdoptBinding implements BindingDeriver. No valid policy for the branch
// and changed paths that give no single binding answer OK false with the
// reason; failed reads are errors.
func (r repoBindings) AdoptBinding(ctx context.Context, projectID, iid int64, targetBranch string) (AdoptedBinding, error) {
	paths, ok := r.e.gl.(changedPaths)
	if _, files := r.e.gl.(policyFiles); !ok || !files {
		return AdoptedBinding{Reason: "this platform adapter cannot read the repository's path rules"}, nil
	}
	at := store.Operation{Platform: r.e.platform, ProjectID: projectID, TargetBranch: targetBranch}
	g, err := r.e.readPolicy(ctx, at, projectID, targetBranch)
	if err != nil {
		return AdoptedBinding{}, err
	}
	if g.Blob == "" {
		if g.Invalid != nil {
			return AdoptedBinding{Reason: fmt.Sprintf("%s on %s is not valid (%v), and no valid one was read before it",
				repoconfig.FileName, targetBranch, g.Invalid)}, nil
		}
		return AdoptedBinding{Reason: fmt.Sprintf("%s has no %s, whose path rules tell which binding a change of these paths is",
			targetBranch, repoconfig.FileName)}, nil
	}
	changed, err := paths.ChangedPaths(ctx, projectID, iid)
	if err != nil {
		return AdoptedBinding{}, fmt.Errorf("listing the changed paths: %w", err)
	}
	subject, target, err := g.Policy.Binding(changed)
	var none *repoconfig.NoBindingError
	if errors.As(err, &none) {
		return AdoptedBinding{Reason: none.Error()}, nil
	}
	if err != nil {
		return AdoptedBinding{}, err
	}
	return AdoptedBinding{SubjectID: subject, TargetKey: target, OK: true}, nil
}
