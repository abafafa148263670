package postgres_test

import (
	"context"
	"testing"
	"time"

	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// TestAccountWaits: an account never blocked reads the zero time; a block
// is seen by every store on the schema (every replica); a shorter block
// recorded later never shortens a longer one; accounts are independent.
func TestAccountWaits(t *testing.T) {
	t.Parallel()
	sc := pgtest.New(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	replica := func() *postgres.Store {
		s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name, NowFunc: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := replica(), replica()
	ctx := context.Background()
	read := func(s *postgres.Store, account string) time.Time {
		t.Helper()
		u, err := s.AccountBlockedUntil(ctx, account)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if u := read(a, "robot"); !u.IsZero() {
		t.Fatalf("never blocked: got %s", u)
	}
	long, short := now.Add(time.Minute), now.Add(10*time.Second)
	if err := a.BlockAccountUntil(ctx, "robot", long); err != nil {
		t.Fatal(err)
	}
	if u := read(b, "robot"); !u.Equal(long) {
		t.Fatalf("the other replica reads %s, want %s", u, long)
	}
	if err := b.BlockAccountUntil(ctx, "robot", short); err != nil {
		t.Fatal(err)
	}
	if u := read(a, "robot"); !u.Equal(long) {
		t.Fatalf("a shorter wait replaced the longer one: %s", u)
	}
	later := now.Add(2 * time.Minute)
	if err := b.BlockAccountUntil(ctx, "robot", later); err != nil {
		t.Fatal(err)
	}
	if u := read(a, "robot"); !u.Equal(later) {
		t.Fatalf("a longer wait was not recorded: %s", u)
	}
	if u := read(a, "reviewer"); !u.IsZero() {
		t.Fatalf("another account is blocked too: %s", u)
	}
}
