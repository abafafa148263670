package routing

import (
	"context"

	"changebot/commands"
	"changebot/flows"
	"changebot/store"
)

// AdoptEngine is what the command layer's adopter calls on the flow engine
// (flows.Engine).
type AdoptEngine interface {
	AdoptsIn(ctx context.Context, projectID int64) (bool, error)
	Adopt(ctx context.Context, p flows.AdoptParams) (store.Operation, bool, error)
}

// Adopter implements commands.Adopter over the flow engine: "@robot merge"
// adopts the merge request (flows.Engine.Adopt, via AdoptViaCommand) and a
// refusal becomes its reply (flows.AdoptRefusedReply).
type Adopter struct{ e AdoptEngine }

var _ commands.Adopter = Adopter{}

// NewAdopter returns the command layer's adopter over engine e.
func NewAdopter(e AdoptEngine) Adopter { return Adopter{e: e} }

// AdoptsIn implements commands.Adopter.
func (a Adopter) AdoptsIn(ctx context.Context, projectID int64) (bool, error) {
	return a.e.AdoptsIn(ctx, projectID)
}

// Adopt implements commands.Adopter.
func (a Adopter) Adopt(ctx context.Context, projectID, iid int64, by, source string) (string, error) {
	_, _, err := a.e.Adopt(ctx, flows.AdoptParams{ProjectID: projectID, IID: iid, By: by, Via: flows.AdoptViaCommand, Source: source})
	if reason, refused := flows.AdoptRefusal(err); refused {
		return flows.AdoptRefusedReply(reason), nil
	}
	return "", err
}
