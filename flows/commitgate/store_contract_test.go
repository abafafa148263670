package commitgate_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"changebot/flows/commitgate"
)

// runStoreContract checks the behaviour every Store must share; newStore
// returns an empty store of its own for each case.
func runStoreContract(t *testing.T, newStore func(t *testing.T) commitgate.Store) {
	t.Helper()
	ref := commitgate.Ref{RunID: "op_1", Step: "merge"}
	first := commitgate.Commit{Ref: ref, Status: "MERGED", Branch: "main", Seq: 7}
	second := commitgate.Commit{Ref: ref, Status: "FAILED", Branch: "dev", Seq: 8}
	claim := func(ctx context.Context, t *testing.T, s commitgate.Store, c commitgate.Commit) int64 {
		t.Helper()
		tok, _, ok, err := s.Claim(ctx, c)
		if err != nil || !ok || tok <= 0 {
			t.Fatalf("Claim = %d, %v, %v; want a positive token", tok, ok, err)
		}
		return tok
	}
	tests := []struct {
		name string
		run  func(ctx context.Context, t *testing.T, s commitgate.Store)
	}{
		{"empty store", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			if _, ok, err := s.Get(ctx, ref); err != nil || ok {
				t.Fatalf("Get = %v, %v; want absent", ok, err)
			}
			if n, err := s.Count(ctx); err != nil || n != 0 {
				t.Fatalf("Count = %d, %v", n, err)
			}
			if ok, err := s.ReleaseToken(ctx, ref, 1); err != nil || ok {
				t.Fatalf("ReleaseToken on absent = %v, %v", ok, err)
			}
		}},
		{"claim then lose to the holder", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			claim(ctx, t, s, first)
			tok, holder, ok, err := s.Claim(ctx, second)
			if err != nil || ok || tok != 0 || holder != first {
				t.Fatalf("second Claim = %d, %+v, %v, %v; want holder %+v", tok, holder, ok, err, first)
			}
			if got, ok, err := s.Get(ctx, ref); err != nil || !ok || got != first {
				t.Fatalf("Get = %+v, %v, %v", got, ok, err)
			}
		}},
		{"stale token leaves the claim", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			tok := claim(ctx, t, s, first)
			if ok, err := s.ReleaseToken(ctx, ref, tok+1000); err != nil || ok {
				t.Fatalf("stale ReleaseToken = %v, %v", ok, err)
			}
			if got, ok, _ := s.Get(ctx, ref); !ok || got != first {
				t.Fatalf("claim gone after stale release: %+v %v", got, ok)
			}
		}},
		{"matching token frees once and new claims get new tokens", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			tok := claim(ctx, t, s, first)
			if ok, err := s.ReleaseToken(ctx, ref, tok); err != nil || !ok {
				t.Fatalf("ReleaseToken = %v, %v; want true", ok, err)
			}
			if ok, err := s.ReleaseToken(ctx, ref, tok); err != nil || ok {
				t.Fatalf("duplicate ReleaseToken = %v, %v; want false", ok, err)
			}
			if n, _ := s.Count(ctx); n != 0 {
				t.Fatalf("Count = %d after release", n)
			}
			tok2 := claim(ctx, t, s, second)
			if tok2 == tok {
				t.Fatalf("re-claim reused token %d", tok)
			}
			if ok, _ := s.ReleaseToken(ctx, ref, tok); ok {
				t.Fatal("late release with the old token freed the new claim")
			}
			if got, _, _ := s.Get(ctx, ref); got != second {
				t.Fatalf("holder = %+v, want %+v", got, second)
			}
		}},
		{"seed if absent is idempotent and never replaces", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			for range 2 {
				if err := s.SeedIfAbsent(ctx, first); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SeedIfAbsent(ctx, second); err != nil {
				t.Fatal(err)
			}
			if got, _, _ := s.Get(ctx, ref); got != first {
				t.Fatalf("holder = %+v, want %+v", got, first)
			}
			if _, holder, ok, _ := s.Claim(ctx, second); ok || holder != first {
				t.Fatalf("Claim over a seed = %v, holder %+v", ok, holder)
			}
			if n, _ := s.Count(ctx); n != 1 {
				t.Fatalf("Count = %d, want 1", n)
			}
		}},
		{"refs are keyed by run and step", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			for _, r := range []commitgate.Ref{ref, {RunID: "op_2", Step: "merge"}, {RunID: "op_1", Step: "validate"}} {
				claim(ctx, t, s, commitgate.Commit{Ref: r, Status: "MERGED"})
			}
			if n, _ := s.Count(ctx); n != 3 {
				t.Fatalf("Count = %d, want 3", n)
			}
		}},
		{"held names the token and the claim time", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			if _, ok, err := s.Held(ctx, ref); err != nil || ok {
				t.Fatalf("Held on absent = %v, %v", ok, err)
			}
			tok := claim(ctx, t, s, first)
			h, ok, err := s.Held(ctx, ref)
			if err != nil || !ok || h.Commit != first || h.Token != tok || h.ClaimedAt.IsZero() {
				t.Fatalf("Held = %+v, %v, %v; want %+v with token %d and a claim time", h, ok, err, first, tok)
			}
		}},
		{"take over replaces only the stale holder it names", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			g := commitgate.NewGuardWithStore(s, nil)
			claim(ctx, t, s, first)
			stale, _, _ := s.Held(ctx, ref)
			l, err := g.TakeOver(ctx, stale, second)
			if err != nil || l.Token <= 0 || l.Token == stale.Token {
				t.Fatalf("TakeOver = %+v, %v; want a new claim", l, err)
			}
			if got, _, _ := s.Get(ctx, ref); got != second {
				t.Fatalf("holder after take over = %+v, want %+v", got, second)
			}
			// A second replica that read the same stale claim loses to the
			// first take over and never displaces it.
			third := commitgate.Commit{Ref: ref, Status: "MERGED", Seq: 9}
			_, err = g.TakeOver(ctx, stale, third)
			var ace *commitgate.AlreadyCommittedError
			if !errors.As(err, &ace) || ace.Prev != second {
				t.Fatalf("late TakeOver = %v; want AlreadyCommittedError naming %+v", err, second)
			}
			if released, _ := g.ReleaseLease(ctx, commitgate.Lease{Ref: ref, Token: stale.Token}); released {
				t.Fatal("the stale holder's late release freed the new claim")
			}
			if _, err := g.TakeOver(ctx, stale, commitgate.Commit{Ref: commitgate.Ref{RunID: "op_9", Step: "merge"}, Status: "MERGED"}); err == nil {
				t.Fatal("TakeOver of another step's claim succeeded")
			}
		}},
		{"concurrent take overs have one winner", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			g := commitgate.NewGuardWithStore(s, nil)
			claim(ctx, t, s, first)
			stale, _, _ := s.Held(ctx, ref)
			const n = 6
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins := 0
			for i := range n {
				wg.Go(func() {
					_, err := g.TakeOver(ctx, stale, commitgate.Commit{Ref: ref, Status: "MERGED", Seq: int64(100 + i)})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						wins++
					case !errors.Is(err, commitgate.ErrAlreadyCommitted):
						t.Errorf("TakeOver %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			if wins != 1 {
				t.Fatalf("take over winners = %d, want 1", wins)
			}
		}},
		{"concurrent claims have one winner", func(ctx context.Context, t *testing.T, s commitgate.Store) {
			const n = 8
			var wg sync.WaitGroup
			wins := make(chan commitgate.Commit, n)
			holders := make(chan commitgate.Commit, n)
			for i := range n {
				wg.Go(func() {
					c := commitgate.Commit{Ref: ref, Status: "MERGED", Seq: int64(i)}
					_, holder, ok, err := s.Claim(ctx, c)
					switch {
					case err != nil:
						t.Errorf("Claim %d: %v", i, err)
					case ok:
						wins <- c
					default:
						holders <- holder
					}
				})
			}
			wg.Wait()
			close(wins)
			close(holders)
			if len(wins) != 1 {
				t.Fatalf("winners = %d, want 1", len(wins))
			}
			winner := <-wins
			for h := range holders {
				if h != winner {
					t.Fatalf("loser saw holder %+v, winner was %+v", h, winner)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(context.Background(), t, newStore(t))
		})
	}
}

func TestMemoryStoreContract(t *testing.T) {
	t.Parallel()
	runStoreContract(t, func(*testing.T) commitgate.Store { return commitgate.NewMemoryStore() })
}
