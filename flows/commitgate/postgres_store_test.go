package commitgate_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/flows/commitgate"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// Environment of a racer process (see TestMain and TestProcessesRace).
const (
	racerEnv    = "COMMITGATE_RACER"    // "1": run as a racer, not as tests
	racerURLEnv = "COMMITGATE_DB_URL"   // database URL with search_path
	racerIDEnv  = "COMMITGATE_RACER_ID" // the racer's number, used as its branch
)

var raceRef = commitgate.Ref{RunID: "op_race", Step: "merge"}

// TestMain lets the test binary re-execute itself as a racer process.
func TestMain(m *testing.M) {
	if os.Getenv(racerEnv) == "1" {
		os.Exit(runRacer())
	}
	os.Exit(m.Run())
}

// runRacer connects, prints "READY", waits for a line on stdin (the start
// signal, sent once every racer is ready), acquires raceRef and prints "WON"
// or "LOST <error naming the holder>".
func runRacer() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv(racerURLEnv))
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "connecting: %v\n", err)
		return 2
	}
	defer pool.Close()
	st, err := postgres.New(pool, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "opening the store: %v\n", err)
		return 2
	}
	g := commitgate.NewGuardWithStore(commitgate.NewDBStore(st, st.DB()), nil)
	id := os.Getenv(racerIDEnv)
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintf(os.Stderr, "waiting for the start signal: %v\n", err)
		return 2
	}
	_, err = g.Acquire(ctx, commitgate.Commit{Ref: raceRef, Status: "MERGED", Branch: "racer-" + id})
	switch {
	case err == nil:
		fmt.Println("WON")
	case errors.Is(err, commitgate.ErrAlreadyCommitted):
		fmt.Println("LOST " + err.Error())
	default:
		fmt.Fprintf(os.Stderr, "acquiring: %v\n", err)
		return 2
	}
	return 0
}

func newPostgresStore(t *testing.T) (*commitgate.DBStore, pgtest.Schema) {
	t.Helper()
	sc := pgtest.New(t)
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	return commitgate.NewDBStore(st, st.DB()), sc
}

func TestPostgresStoreContract(t *testing.T) {
	t.Parallel()
	runStoreContract(t, func(t *testing.T) commitgate.Store {
		s, _ := newPostgresStore(t)
		return s
	})
}

// TestPostgresStoreWithClock: claims and seeds carry the caller's clock as
// their claim time, so a claim's age is measured on the same clock as the
// caller's job timeout.
func TestPostgresStoreWithClock(t *testing.T) {
	t.Parallel()
	s, _ := newPostgresStore(t)
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	cs := s.WithClock(func() time.Time { return at })
	ctx := context.Background()
	for _, c := range []commitgate.Commit{{Ref: commitgate.Ref{RunID: "op_1", Step: "merge"}, Status: "MERGED"},
		{Ref: commitgate.Ref{RunID: "op_2", Step: "merge"}, Status: "MERGED"}} {
		if c.Ref.RunID == "op_1" {
			if _, _, _, err := cs.Claim(ctx, c); err != nil {
				t.Fatal(err)
			}
		} else if err := cs.SeedIfAbsent(ctx, c); err != nil {
			t.Fatal(err)
		}
		h, ok, err := cs.Held(ctx, c.Ref)
		if err != nil || !ok || !h.ClaimedAt.Equal(at) {
			t.Fatalf("%s: Held = %+v, %v, %v; want claimed at %s", c.Ref.RunID, h, ok, err, at)
		}
	}
}

func TestGoroutinesRaceOnPostgres(t *testing.T) {
	t.Parallel()
	s, _ := newPostgresStore(t)
	g := commitgate.NewGuardWithStore(s, nil)
	ctx := context.Background()
	const racers = 8
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		winner = -1
		losses []error
	)
	start := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-start
			_, err := g.Acquire(ctx, commitgate.Commit{Ref: raceRef, Status: "MERGED", Branch: fmt.Sprintf("racer-%d", i), Seq: int64(i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if winner >= 0 {
					t.Errorf("racers %d and %d both won", winner, i)
				}
				winner = i
			case errors.Is(err, commitgate.ErrAlreadyCommitted):
				losses = append(losses, err)
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if winner < 0 || len(losses) != racers-1 {
		t.Fatalf("winner %d, %d losses; want one winner and %d losses", winner, len(losses), racers-1)
	}
	prefix := fmt.Sprintf(`step "merge" of run "op_race" already committed as MERGED on branch racer-%d at seq %d; refused MERGED on branch racer-`, winner, winner)
	for _, err := range losses {
		if !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("loser's error = %q, want it to start %q", err.Error(), prefix)
		}
	}
	if n, err := g.Committed(ctx); err != nil || n != 1 {
		t.Fatalf("Committed = %d, %v; want 1", n, err)
	}
}

func TestProcessesRaceOnOneDatabase(t *testing.T) {
	t.Parallel()
	s, sc := newPostgresStore(t)
	const racers = 4
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outs := make([]*bufio.Reader, racers)
	starts := make([]io.WriteCloser, racers)
	cmds := make([]*exec.Cmd, racers)
	for i := range racers {
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(),
			racerEnv+"=1",
			racerURLEnv+"="+sc.URL,
			racerIDEnv+"="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if starts[i], err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting racer %d: %v", i, err)
		}
		cmds[i], outs[i] = cmd, bufio.NewReader(stdout)
	}
	// Every racer is connected before any starts: they race on the claim.
	for i, out := range outs {
		if line, err := out.ReadString('\n'); err != nil || line != "READY\n" {
			t.Fatalf("racer %d: %q, %v; want READY", i, line, err)
		}
	}
	for _, start := range starts {
		_, _ = io.WriteString(start, "GO\n")
		_ = start.Close()
	}
	results := make([]string, racers)
	for i, out := range outs {
		b, err := io.ReadAll(out)
		if err != nil {
			t.Fatalf("reading racer %d: %v", i, err)
		}
		results[i] = strings.TrimSpace(string(b))
	}
	winner := -1
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("racer %d: %v (output %q)", i, err, results[i])
		}
		if results[i] == "WON" {
			if winner >= 0 {
				t.Fatalf("racers %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	for i := range racers {
		want := fmt.Sprintf(`LOST step "merge" of run "op_race" already committed as MERGED on branch racer-%d at seq 0; refused MERGED on branch racer-%d at seq 0`, winner, i)
		if got := results[i]; i != winner && got != want {
			t.Fatalf("racer %d printed %q, want %q", i, got, want)
		}
	}
	got, ok, err := s.Get(context.Background(), raceRef)
	if err != nil || !ok || got.Branch != fmt.Sprintf("racer-%d", winner) {
		t.Fatalf("stored holder = %+v, %v, %v; want racer-%d", got, ok, err, winner)
	}
}

func TestPostgresClaimInTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := commitgate.Commit{Ref: raceRef, Status: "MERGED", Branch: "main", Seq: 7}
	tests := []struct {
		name      string
		commit    bool
		wantClaim bool
	}{
		{"rolled back claim leaves no record", false, false},
		{"committed claim is held", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, sc := newPostgresStore(t)
			tx, err := sc.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := commitgate.NewGuardWithStore(s.InTx(postgres.TxOf(tx)), nil).Acquire(ctx, c); err != nil {
				t.Fatalf("Acquire in tx: %v", err)
			}
			// A competing claim outside the transaction waits for it.
			outcome := make(chan error, 1)
			go func() {
				_, err := commitgate.NewGuardWithStore(s, nil).Acquire(ctx, commitgate.Commit{Ref: raceRef, Status: "MERGED", Branch: "other"})
				outcome <- err
			}()
			var holder int
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
				t.Fatal(err)
			}
			pgtest.WaitBlockedBy(t, sc.Pool, holder, outcome)
			if tc.commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			err = <-outcome
			if tc.wantClaim {
				wantHolder(t, err, c)
			} else if err != nil {
				t.Fatalf("competing claim after rollback: %v", err)
			}
		})
	}
}

func TestMigrationDownDropsCommitClaims(t *testing.T) {
	t.Parallel()
	_, sc := newPostgresStore(t)
	ctx := context.Background()
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name, Down: true}); err != nil {
		t.Fatalf("down: %v", err)
	}
	var n int
	err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname IN ('commit_claims', 'commit_claim_tokens')`, sc.Name).Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("relations left after down: %d (%v)", n, err)
	}
}
