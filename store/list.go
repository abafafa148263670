package store

import "time"

// ListParams select the changes ListChanges returns (issue 13 point 1, GET
// /api/v1/changes). Zero fields do not filter; the filters that are set
// all apply (AND).
type ListParams struct {
	// Statuses: only operations in one of these binding statuses.
	Statuses []string
	// Steps: only operations at one of these step codes.
	Steps []int
	// Project: only operations of this project: compared with
	// Operation.Project in any case (the path the platform answered at
	// submit; rows stored before that keep the submitter's spelling), or,
	// as decimal text, with Operation.ProjectID (so 101 and Platform/Config
	// find the same changes, as submit accepts both).
	Project string
	// SubjectID, TargetKey and RequestedBy: exact matches.
	SubjectID, TargetKey, RequestedBy string
	// RolloutID: only the changes of this rollout (exact match).
	RolloutID string
	// UpdatedAfter and UpdatedBefore bound updated_at, both exclusive;
	// zero times do not bound.
	UpdatedAfter, UpdatedBefore time.Time
	// StuckOnly keeps only operations matching one of Stuck (none when
	// Stuck is empty).
	StuckOnly bool
	// Stuck are the per-step thresholds of "stuck": an operation at Step
	// whose step started before StartedBefore. The caller computes them
	// from the step table and settings; the store does not know the flow.
	Stuck []StuckBound
	// Before is the keyset cursor: only operations whose id sorts before it
	// ("" for the first page). Ids are ULIDs, fixed at creation, so a page
	// never repeats or skips a change because another one moved.
	Before string
	// Limit bounds the rows (the caller caps it).
	Limit int
}

// StuckBound is one step's stuck threshold (ListParams.Stuck).
type StuckBound struct {
	// Step is a step code.
	Step int
	// StartedBefore: an operation at Step whose step_started_at is earlier
	// is stuck.
	StartedBefore time.Time
}
