package flows

import (
	"context"
	"errors"
	"fmt"

	"changebot/platform"
	"changebot/repoconfig"
)

// RepoFiles is what RepoBindings reads on the platform: a file at a ref and
// the paths a merge request changes (both adapters and both fakes).
type RepoFiles interface {
	FileAt(ctx context.Context, projectID int64, path, ref string) ([]byte, error)
	ChangedPaths(ctx context.Context, projectID, iid int64) ([]string, error)
}

// RepoBindings is the BindingDeriver of the repository's own path rules
// (issue 25 point 2): `.changebot.yml` read from the merge request's
// target branch (repoconfig.Parse), and its paths rules over the paths the
// merge request changes (repoconfig.Policy.Binding). Two reads per
// adoption.
type RepoBindings struct{ Files RepoFiles }

// AdoptBinding implements BindingDeriver. No file on the target branch, an
// invalid one, and changed paths that give no single binding answer OK
// false with the reason; failed reads are errors.
func (r RepoBindings) AdoptBinding(ctx context.Context, projectID, iid int64, targetBranch string) (AdoptedBinding, error) {
	data, err := r.Files.FileAt(ctx, projectID, repoconfig.FileName, targetBranch)
	if errors.Is(err, platform.ErrNotFound) {
		return AdoptedBinding{Reason: fmt.Sprintf("%s has no %s, whose path rules tell which binding a change of these paths is",
			targetBranch, repoconfig.FileName)}, nil
	}
	if err != nil {
		return AdoptedBinding{}, fmt.Errorf("reading %s on %s: %w", repoconfig.FileName, targetBranch, err)
	}
	pol, err := repoconfig.Parse(data)
	if err != nil {
		return AdoptedBinding{Reason: fmt.Sprintf("%s on %s is not valid: %v", repoconfig.FileName, targetBranch, err)}, nil
	}
	paths, err := r.Files.ChangedPaths(ctx, projectID, iid)
	if err != nil {
		return AdoptedBinding{}, fmt.Errorf("listing the changed paths: %w", err)
	}
	subject, target, err := pol.Binding(paths)
	var none *repoconfig.NoBindingError
	if errors.As(err, &none) {
		return AdoptedBinding{Reason: none.Error()}, nil
	}
	if err != nil {
		return AdoptedBinding{}, err
	}
	return AdoptedBinding{SubjectID: subject, TargetKey: target, OK: true}, nil
}
