package flows

import (
	"context"

	"changebot/flows/rules"
	"changebot/store"
)

// RunJob runs one attempt (attempt of maxAttempts) of the step job of kind
// for operation id at step, as River's worker would.
func (e *Engine) RunJob(ctx context.Context, kind, id string, step rules.StepCode, attempt, maxAttempts int) error {
	runs := map[string]stepFunc{rules.KindRequestApproval: e.requestApproval, rules.KindCreateMR: e.createWorker().createMR,
		rules.KindAwaitPipeline: e.pipelineWorker().awaitPipeline, rules.KindHandle: e.handleWorker().handle, rules.KindAwaitDeploy: e.deployWorker().awaitDeploy}
	return e.runStep(ctx, kind, OperationArgs{OperationID: id, Step: int(step)}, attempt, maxAttempts, runs[kind])
}

// RunStepFunc runs run as one attempt (attempt of maxAttempts) of a step
// job of kind for operation id at step, inside the runner's boundary.
func (e *Engine) RunStepFunc(ctx context.Context, kind, id string, step rules.StepCode, attempt, maxAttempts int,
	run func(context.Context, store.Operation) error) error {
	return e.runStep(ctx, kind, OperationArgs{OperationID: id, Step: int(step)}, attempt, maxAttempts, run)
}

// NoteClaimLease is how long a refresh's claim on an MR's status note lasts
// without being renewed (what a replica that died leaves behind).
const NoteClaimLease = noteClaimLease
