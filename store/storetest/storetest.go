// Package storetest is the contract suite of the store (store.Store): the
// behaviour every implementation must show, run by each implementation's
// tests against stores it opens (Run). A case uses only the contract, never
// SQL, so a second engine runs the same suite; what only one engine has
// (migrations, its locks, its SQL) is tested beside that implementation.
// It must only be imported by tests.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
)

// Opts are what a case asks of a store it opens.
type Opts struct {
	// NowFunc is the store's clock; nil means time.Now.
	NowFunc func() time.Time
}

// Open makes a new, empty, migrated database of the implementation under
// test and returns the function that opens a store on it with opts: call
// it twice for two replicas on one database. Everything is released when t
// ends; a database that cannot be made fails t (or skips it under -short).
type Open func(t testing.TB) func(opts Opts) store.Store

// Run runs every case of the contract, each in parallel on a database of
// its own.
func Run(t *testing.T, open Open) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open)
		})
	}
}

func newOp(id, subject string) store.Operation {
	return store.Operation{ID: id, SubjectID: subject, TargetKey: "prod", Project: "g/r", Title: "t",
		RequestedBy: "alice", ApprovalFirst: true, Step: 10401, Status: store.StatusApprovalSending,
		Files: []store.File{{Path: "a.yaml", Content: "x: 1"}}}
}

func create(t *testing.T, s store.Store, op store.Operation) store.Operation {
	t.Helper()
	got, created, err := s.CreateOperation(context.Background(), store.CreateParams{Operation: op,
		Event: store.EventParams{Type: store.EventSubmitted, Actor: op.RequestedBy, Source: "api"}})
	if err != nil || !created {
		t.Fatalf("CreateOperation: created=%v err=%v", created, err)
	}
	return got
}

// deliveryArgs is a stand-in process-delivery job (store must not import
// flows).
type deliveryArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

func (deliveryArgs) Kind() string { return "test_delivery" }

func deliveryJob(id int64) river.InsertManyParams {
	return river.InsertManyParams{Args: deliveryArgs{DeliveryID: id}}
}
