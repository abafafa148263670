package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/repoconfig"
)

// policyCheckMarker is the HTML comment that marks the robot's one
// validation comment of `.changebot.yml` on a merge request (issue 25
// point 2): found on the merge request (FindNote), it is edited, never
// posted twice.
const policyCheckMarker = "<!-- changebot:policy-check -->"

// checkPolicyFile validates the `.changebot.yml` of a developer's merge
// request whose hook ev says it opened, reopened or moved its head
// (platform.MergeRequestHook.MayChangePolicy): when the merge request
// changes the file (ChangedPaths), the file at the hook's head sha is
// parsed and the robot's one validation comment is posted or edited
// (PolicyCheckComment): valid, or every problem with its line and key. A
// merge request that does not change the file costs one read. It returns
// whether it wrote a comment.
func (e *Engine) checkPolicyFile(ctx context.Context, ev platform.HookEvent) (bool, error) {
	h := ev.MergeRequest
	files, okFiles := e.gl.(policyFiles)
	paths, okPaths := e.gl.(changedPaths)
	if !okFiles || !okPaths || h.SHA == "" {
		return false, nil
	}
	w := rules.WordsOf(e.platform)
	changed, err := paths.ChangedPaths(ctx, ev.ProjectID, h.IID)
	if err != nil {
		return false, fmt.Errorf("listing the paths %s changes: %w", w.MRRef(h.IID), err)
	}
	if !slices.Contains(changed, repoconfig.FileName) {
		return false, nil
	}
	data, err := files.FileAt(ctx, ev.ProjectID, repoconfig.FileName, h.SHA)
	var body string
	switch {
	case errors.Is(err, platform.ErrNotFound):
		body = PolicyCheckComment(w, h.SHA, h.TargetBranch, nil, true)
	case err != nil:
		return false, fmt.Errorf("reading %s of %s at %s: %w", repoconfig.FileName, w.MRRef(h.IID), short(h.SHA), err)
	default:
		_, perr := repoconfig.Parse(data)
		var invalid *repoconfig.InvalidError
		if perr != nil && !errors.As(perr, &invalid) {
			return false, perr
		}
		body = PolicyCheckComment(w, h.SHA, h.TargetBranch, invalid, false)
	}
	note, err := e.gl.FindNote(ctx, ev.ProjectID, h.IID, policyCheckMarker)
	switch {
	case err == nil && note.Body == body:
		return false, nil
	case err == nil:
		_, err = e.gl.UpdateNote(ctx, ev.ProjectID, h.IID, note.ID, body)
	case errors.Is(err, platform.ErrNotFound):
		_, err = e.gl.CreateNote(ctx, ev.ProjectID, h.IID, body)
	}
	if err != nil {
		return false, fmt.Errorf("writing the %s check on %s: %w", repoconfig.FileName, w.MRRef(h.IID), err)
	}
	e.log.Info("checked the policy file of a merge request", "project_id", ev.ProjectID, "mr_iid", h.IID,
		"sha", h.SHA, "valid", !strings.Contains(body, "is not valid"))
	return true, nil
}

// PolicyCheckComment is the robot's validation comment of a merge
// request's `.changebot.yml` at head sha (w's words): valid; or invalid,
// listing every problem as "line 3 `queue.mode`: …" and saying that merged
// it would not govern (the target branch's last valid file would); or
// removed (the server's settings would govern alone).
func PolicyCheckComment(w rules.Words, sha, target string, invalid *repoconfig.InvalidError, removed bool) string {
	var b strings.Builder
	b.WriteString(policyCheckMarker + "\n")
	file := "`" + repoconfig.FileName + "`"
	switch {
	case removed:
		fmt.Fprintf(&b, "**%s is removed** by this %s (at `%s`): once merged, changes to `%s` are governed by the server's settings alone.\n",
			file, w.MR, short(sha), target)
	case invalid == nil:
		fmt.Fprintf(&b, "**%s is valid** (at `%s`): once merged, it governs the changes to `%s` that start after it.\n",
			file, short(sha), target)
	default:
		fmt.Fprintf(&b, "**%s is not valid** (at `%s`): merged as it is, it would govern nothing; the last valid %s of `%s` would go on governing its changes.\n\n",
			file, short(sha), file, target)
		for _, p := range invalid.Problems {
			b.WriteString("- " + p.String() + "\n")
		}
		b.WriteString("\nThe keys and their values are listed in changebot's docs/changebot-yml.md; its schema is served at `/api/v1/schema/changebot.yml`.\n")
	}
	return b.String()
}
