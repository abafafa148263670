package backend

import (
	"context"

	"changebot/api"
	"changebot/flows/rules"
	"changebot/notify"
	"changebot/store"
)

// RolloutStore is what Rollouts reads: the store's rollout aggregate.
type RolloutStore interface {
	DB() store.DBTX
	ReadRollout(ctx context.Context, db store.DBTX, p store.RolloutReadParams) (store.Rollout, error)
}

// Rollouts is api.Rollouts over the store: the progress a summary
// notification tells (notify.SummarizeRollout), listing at most
// api.MaxRolloutAttention changes.
type Rollouts struct {
	Store RolloutStore
}

var _ api.Rollouts = Rollouts{}

// ReadRollout implements api.Rollouts.
func (r Rollouts) ReadRollout(ctx context.Context, id string) (api.RolloutView, error) {
	ro, err := r.Store.ReadRollout(ctx, r.Store.DB(), notify.RolloutReadParams(id, api.MaxRolloutAttention))
	if err != nil {
		return api.RolloutView{}, Error(err)
	}
	return RolloutViewOf(notify.SummarizeRollout(ro)), nil
}

// RolloutViewOf is s in the API's shape.
func RolloutViewOf(s notify.RolloutSummary) api.RolloutView {
	v := api.RolloutView{RolloutID: s.ID, State: string(s.State), Total: s.Total, Counts: s.Counts, Applied: s.Applied,
		Failed: s.Failed, NeedsPerson: s.NeedsPerson, Attention: []api.RolloutChangeView{}, More: s.More,
		FirstCreatedAt: s.FirstCreatedAt.UTC(), LastUpdatedAt: s.LastUpdatedAt.UTC()}
	for _, c := range s.Attention {
		cv := api.RolloutChangeView{OperationID: c.OperationID, Project: c.Project, SubjectID: c.SubjectID, TargetKey: c.TargetKey,
			Standing: string(c.Standing), Status: c.Status, Step: api.StepView{Code: c.StepCode, Name: rules.StepCode(c.StepCode).String()},
			Detail: c.Detail}
		if c.MergeRequest != nil {
			cv.MergeRequest = &api.MRView{ProjectID: c.ProjectID, IID: c.MergeRequest.IID, WebURL: c.MergeRequest.WebURL}
		}
		v.Attention = append(v.Attention, cv)
	}
	return v
}
