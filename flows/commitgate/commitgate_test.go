package commitgate_test

import (
	"context"
	"errors"
	"testing"

	"changebot/flows/commitgate"
)

var (
	mergeRef = commitgate.Ref{RunID: "op_1", Step: "merge"}
	merged   = commitgate.Commit{Ref: mergeRef, Status: "MERGED", Branch: "main", Seq: 7}
)

func terminalOnly(statuses ...string) func(string) bool {
	return func(s string) bool {
		for _, t := range statuses {
			if s == t {
				return true
			}
		}
		return false
	}
}

// wantHolder fails unless err is an *AlreadyCommittedError naming want as
// the previous commit (and, when refused is given, that refused commit).
func wantHolder(t *testing.T, err error, want commitgate.Commit, refused ...commitgate.Commit) {
	t.Helper()
	if !errors.Is(err, commitgate.ErrAlreadyCommitted) {
		t.Fatalf("error = %v, want ErrAlreadyCommitted", err)
	}
	var ace *commitgate.AlreadyCommittedError
	if !errors.As(err, &ace) {
		t.Fatalf("error = %T, want *AlreadyCommittedError", err)
	}
	if ace.Prev != want || ace.Ref != want.Ref {
		t.Fatalf("previous commit = %+v (ref %+v), want %+v", ace.Prev, ace.Ref, want)
	}
	if len(refused) > 0 && ace.Refused != refused[0] {
		t.Fatalf("refused commit = %+v, want %+v", ace.Refused, refused[0])
	}
}

func TestGuardWithMemoryStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		isTerminal func(string) bool
		run        func(ctx context.Context, t *testing.T, g *commitgate.Guard)
	}{
		{name: "empty run id is refused", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			_, err := g.Acquire(ctx, commitgate.Commit{Ref: commitgate.Ref{Step: "merge"}, Status: "MERGED"})
			if !errors.Is(err, commitgate.ErrEmptyRef) {
				t.Fatalf("Acquire = %v, want ErrEmptyRef", err)
			}
		}},
		{name: "empty step is refused everywhere", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			ref := commitgate.Ref{RunID: "op_1"}
			_, aErr := g.Acquire(ctx, commitgate.Commit{Ref: ref, Status: "MERGED"})
			_, rErr := g.ReleaseLease(ctx, commitgate.Lease{Ref: ref, Token: 1})
			sErr := g.Seed(ctx, commitgate.Commit{Ref: ref, Status: "MERGED"})
			_, _, gErr := g.Status(ctx, ref)
			for i, err := range []error{aErr, rErr, sErr, gErr} {
				if !errors.Is(err, commitgate.ErrEmptyRef) {
					t.Fatalf("call %d = %v, want ErrEmptyRef", i, err)
				}
			}
		}},
		{name: "non-terminal commit passes without record", isTerminal: terminalOnly("MERGED"), run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			for range 2 {
				l, err := g.Acquire(ctx, commitgate.Commit{Ref: mergeRef, Status: "MERGING"})
				if err != nil || l.Token != 0 {
					t.Fatalf("Acquire = %+v, %v; want zero token, nil", l, err)
				}
			}
			if n, _ := g.Committed(ctx); n != 0 {
				t.Fatalf("Committed = %d, want 0", n)
			}
			if _, err := g.Acquire(ctx, merged); err != nil {
				t.Fatalf("terminal Acquire after non-terminal ones: %v", err)
			}
		}},
		{name: "nil isTerminal treats every status as terminal", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			if l, err := g.Acquire(ctx, commitgate.Commit{Ref: mergeRef, Status: "ANYTHING"}); err != nil || l.Token <= 0 {
				t.Fatalf("Acquire = %+v, %v; want a positive token", l, err)
			}
		}},
		{name: "first acquire wins", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			l, err := g.Acquire(ctx, merged)
			if err != nil || l.Token <= 0 || l.Ref != mergeRef {
				t.Fatalf("Acquire = %+v, %v", l, err)
			}
			got, ok, err := g.Status(ctx, mergeRef)
			if err != nil || !ok || got != merged {
				t.Fatalf("Status = %+v, %v, %v; want %+v", got, ok, err, merged)
			}
			if n, _ := g.Committed(ctx); n != 1 {
				t.Fatalf("Committed = %d, want 1", n)
			}
		}},
		{name: "second acquire names the holder", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			if _, err := g.Acquire(ctx, merged); err != nil {
				t.Fatal(err)
			}
			refused := commitgate.Commit{Ref: mergeRef, Status: "FAILED", Branch: "dev", Seq: 8}
			_, err := g.Acquire(ctx, refused)
			wantHolder(t, err, merged, refused)
			const want = `step "merge" of run "op_1" already committed as MERGED on branch main at seq 7; refused FAILED on branch dev at seq 8`
			if err.Error() != want {
				t.Fatalf("error text = %q, want %q", err.Error(), want)
			}
		}},
		{name: "same step of another run is independent", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			if _, err := g.Acquire(ctx, merged); err != nil {
				t.Fatal(err)
			}
			other := merged
			other.Ref.RunID = "op_2"
			if _, err := g.Acquire(ctx, other); err != nil {
				t.Fatalf("other run: %v", err)
			}
		}},
		{name: "stale-token release leaves the claim", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			l, err := g.Acquire(ctx, merged)
			if err != nil {
				t.Fatal(err)
			}
			for _, tok := range []int64{l.Token + 1, l.Token - 1, 0, -1} {
				if ok, err := g.ReleaseLease(ctx, commitgate.Lease{Ref: mergeRef, Token: tok}); err != nil || ok {
					t.Fatalf("release with token %d = %v, %v; want false, nil", tok, ok, err)
				}
			}
			_, err = g.Acquire(ctx, merged)
			wantHolder(t, err, merged)
		}},
		{name: "matching release frees and duplicate is a no-op", run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			l, err := g.Acquire(ctx, merged)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := g.ReleaseLease(ctx, l); err != nil || !ok {
				t.Fatalf("release = %v, %v; want true", ok, err)
			}
			if _, ok, _ := g.Status(ctx, mergeRef); ok {
				t.Fatal("claim still present after release")
			}
			next, err := g.Acquire(ctx, merged)
			if err != nil || next.Token == l.Token {
				t.Fatalf("re-acquire = %+v, %v; want a new token", next, err)
			}
			if ok, err := g.ReleaseLease(ctx, l); err != nil || ok {
				t.Fatalf("late release of the old lease = %v, %v; want false", ok, err)
			}
			if _, ok, _ := g.Status(ctx, mergeRef); !ok {
				t.Fatal("late release freed the new holder's claim")
			}
		}},
		{name: "seed is idempotent and never replaces", isTerminal: terminalOnly("MERGED", "VALIDATED"), run: func(ctx context.Context, t *testing.T, g *commitgate.Guard) {
			newer := commitgate.Commit{Ref: mergeRef, Status: "VALIDATED", Branch: "main", Seq: 9}
			if _, err := g.Acquire(ctx, newer); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := g.Seed(ctx, merged); err != nil {
					t.Fatal(err)
				}
			}
			if got, _, _ := g.Status(ctx, mergeRef); got != newer {
				t.Fatalf("after Seed, holder = %+v, want %+v", got, newer)
			}
			seeded := commitgate.Commit{Ref: commitgate.Ref{RunID: "op_2", Step: "merge"}, Status: "MERGED", Seq: 3}
			for range 3 {
				if err := g.Seed(ctx, seeded); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.Seed(ctx, commitgate.Commit{Ref: commitgate.Ref{RunID: "op_3", Step: "merge"}, Status: "MERGING"}); err != nil {
				t.Fatal(err)
			}
			if n, _ := g.Committed(ctx); n != 2 {
				t.Fatalf("Committed = %d, want 2", n)
			}
			refused := commitgate.Commit{Ref: seeded.Ref, Status: "MERGED", Seq: 4}
			_, err := g.Acquire(ctx, refused)
			wantHolder(t, err, seeded, refused)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(context.Background(), t, commitgate.NewGuard(tc.isTerminal))
		})
	}
}

func TestUnconfiguredGuardIsUnusable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var zero commitgate.Guard
	var nilGuard *commitgate.Guard
	guards := map[string]*commitgate.Guard{
		"zero value": &zero,
		"nil store":  commitgate.NewGuardWithStore(nil, nil),
		"nil guard":  nilGuard,
	}
	calls := []struct {
		name string
		call func(g *commitgate.Guard) error
	}{
		{"Acquire", func(g *commitgate.Guard) error { _, err := g.Acquire(ctx, merged); return err }},
		{"Acquire non-terminal", func(g *commitgate.Guard) error {
			_, err := g.Acquire(ctx, commitgate.Commit{Ref: mergeRef})
			return err
		}},
		{"ReleaseLease", func(g *commitgate.Guard) error {
			_, err := g.ReleaseLease(ctx, commitgate.Lease{Ref: mergeRef, Token: 1})
			return err
		}},
		{"Seed", func(g *commitgate.Guard) error { return g.Seed(ctx, merged) }},
		{"Status", func(g *commitgate.Guard) error { _, _, err := g.Status(ctx, mergeRef); return err }},
		{"Committed", func(g *commitgate.Guard) error { _, err := g.Committed(ctx); return err }},
	}
	for gname, g := range guards {
		for _, c := range calls {
			t.Run(gname+"/"+c.name, func(t *testing.T) {
				if err := c.call(g); !errors.Is(err, commitgate.ErrUnconfigured) {
					t.Fatalf("%s = %v, want ErrUnconfigured", c.name, err)
				}
			})
		}
	}
}

func TestAlreadyCommittedErrorText(t *testing.T) {
	t.Parallel()
	validate := commitgate.Ref{RunID: "op_2", Step: "validate"}
	tests := []struct {
		name          string
		prev, refused commitgate.Commit
		want          string
	}{
		{"with branch", merged, commitgate.Commit{Ref: mergeRef, Status: "MERGED", Branch: "main", Seq: 8},
			`step "merge" of run "op_1" already committed as MERGED on branch main at seq 7; refused MERGED on branch main at seq 8`},
		{"without branch", commitgate.Commit{Ref: validate, Status: "VALIDATED", Seq: 3}, commitgate.Commit{Ref: validate, Status: "VALIDATED", Seq: 3},
			`step "validate" of run "op_2" already committed as VALIDATED at seq 3; refused VALIDATED at seq 3`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := error(&commitgate.AlreadyCommittedError{Ref: tc.prev.Ref, Prev: tc.prev, Refused: tc.refused})
			if err.Error() != tc.want {
				t.Fatalf("Error() = %q, want %q", err.Error(), tc.want)
			}
			if !errors.Is(err, commitgate.ErrAlreadyCommitted) || errors.Is(err, commitgate.ErrEmptyRef) {
				t.Fatal("errors.Is mismatch")
			}
		})
	}
}
