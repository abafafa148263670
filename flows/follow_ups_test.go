package flows

import (
	"testing"
	"time"

	"changebot/flows/rules"
	"changebot/store"
)

// TestResumeEnqueuesTheStepJob: for every step the step table calls
// resumable, followUps enqueues a step job at the step /resume lands on, in
// both flow orders (rules.TestResumableStepsLandOnAJob checks the table).
func TestResumeEnqueuesTheStepJob(t *testing.T) {
	t.Parallel()
	e := &Engine{poll: DefaultPollConfig, now: time.Now}
	for _, s := range rules.Catalogue() {
		if !s.Resumable() {
			continue
		}
		for _, first := range []bool{true, false} {
			hasStepJob := false
			for _, j := range e.followUps(store.Operation{ID: "op_x", ApprovalFirst: first}, s.Resume, 2, 0) {
				if _, note := j.Args.(RefreshNoteArgs); !note {
					hasStepJob = true
				}
			}
			if !hasStepJob {
				t.Errorf("%s is resumable but /resume would enqueue no step job (approval first %v)", s.Name, first)
			}
		}
	}
}
