package rules

import "fmt"

// Words is one platform's vocabulary for the texts people read (details,
// hints, refusals), chosen from the change's platform (store.Operation's
// Platform; issue 15): GitLab speaks of "merge request !7" and its
// "pipeline", GitHub of "pull request #7" and its "checks". The status
// comment's template has the same words (templates.StatusView.Platform).
type Words struct {
	// Platform is the platform's name: "GitLab" or "GitHub".
	Platform string
	// MR is the request's noun: "merge request" or "pull request".
	MR string
	// Pipeline is the head's CI noun: "pipeline" or "checks".
	Pipeline string
	// NewRun is asking CI to run the head again: "a new pipeline" or "a
	// re-run of the checks".
	NewRun string
	// Deploy is what confirms a merge applied, the target branch's CI:
	// "deploy pipeline" or "deploy run" (a workflow run or check).
	Deploy string
	// PipelineCheck is the await_pipeline job's work in the timeline:
	// "pipeline check" or "checks poll".
	PipelineCheck string
	// PipelineHook is a CI webhook in the timeline: "pipeline webhook" or
	// "checks webhook".
	PipelineHook string
	// Train is the platform's own merge queue of a branch: "merge train"
	// (GitLab) or "merge queue" (GitHub, a branch rule).
	Train string
	// TrainPipeline is the CI that queue runs before it merges: "train
	// pipeline" or "merge group checks" (merge_group).
	TrainPipeline string
	// mark prefixes a request's number: "!" or "#".
	mark string
}

// The two platforms' words (WordsOf).
var (
	gitlabWords = Words{Platform: "GitLab", MR: "merge request", Pipeline: "pipeline", NewRun: "a new pipeline", Deploy: "deploy pipeline",
		PipelineCheck: "pipeline check", PipelineHook: "pipeline webhook", Train: "merge train", TrainPipeline: "train pipeline", mark: "!"}
	githubWords = Words{Platform: "GitHub", MR: "pull request", Pipeline: "checks", NewRun: "a re-run of the checks", Deploy: "deploy run",
		PipelineCheck: "checks poll", PipelineHook: "checks webhook", Train: "merge queue", TrainPipeline: "merge group checks", mark: "#"}
)

// WordsOf returns the vocabulary of platform (PlatformGitLab, also
// "", or PlatformGitHub).
func WordsOf(platform string) Words {
	if platform == PlatformGitHub {
		return githubWords
	}
	return gitlabWords
}

// OnGitHub reports whether w are GitHub's words (the few texts that differ
// by more than a noun: checks waiting for a deployment review, a run's
// reference).
func (w Words) OnGitHub() bool { return w == githubWords }

// Ref is the request's short reference as the platform writes it: "!7" or
// "#7".
func (w Words) Ref(iid int64) string { return fmt.Sprintf("%s%d", w.mark, iid) }

// MRRef is the request named in full: "merge request !7" or "pull request
// #7".
func (w Words) MRRef(iid int64) string { return w.MR + " " + w.Ref(iid) }

// PipelineRef names one run of the head's CI by its id: "pipeline 12", or
// "checks (run 12)" on GitHub (the adapter's synthesized pipeline id).
func (w Words) PipelineRef(id int64) string {
	if w.OnGitHub() {
		return fmt.Sprintf("checks (run %d)", id)
	}
	return fmt.Sprintf("pipeline %d", id)
}
