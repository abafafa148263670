package store

import (
	"time"
)

// CommitClaim is one claim of the exclusive terminal commit of step Step
// of run RunID (table commit_claims, migration 0002; the rules are
// flows/commitgate's, DESIGN §6).
type CommitClaim struct {
	RunID  string
	Step   string
	Status string
	Branch string
	Seq    int64
	// Token is minted by the store when the claim is written (a database
	// sequence: positive, never reused); ignored on input.
	Token int64
	// ClaimedAt is when the claim was written, in UTC. On input the zero
	// time means the database's clock.
	ClaimedAt time.Time
}
