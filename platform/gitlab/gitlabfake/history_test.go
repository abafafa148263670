package gitlabfake

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestHistoryWalksAgreeWithFullWalks: isAncestor and mergeBase, which stop
// early (walking newest first), answer as the full walks of both histories
// do, on random histories of merges and branches.
func TestHistoryWalksAgreeWithFullWalks(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := &repo{commits: map[string]*commit{}}
		var ids []string
		for i := range 120 {
			var parents []string
			if i > 0 {
				parents = append(parents, ids[rng.IntN(len(ids))])
				if rng.IntN(3) == 0 {
					parents = append(parents, ids[rng.IntN(len(ids))])
				}
			}
			id := fmt.Sprintf("c%03d", i)
			r.commits[id] = &commit{id: id, parents: parents, seq: int64(i + 1)}
			ids = append(ids, id)
		}
		for range 300 {
			a, b := ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]
			if got, want := r.isAncestor(a, b), r.ancestors(b)[a]; got != want {
				t.Fatalf("seed %d: isAncestor(%s, %s) = %v, want %v", seed, a, b, got, want)
			}
			aa, bb := r.ancestors(a), r.ancestors(b)
			want := ""
			for c := range aa {
				if bb[c] && (want == "" || r.commits[c].seq > r.commits[want].seq) {
					want = c
				}
			}
			if got := r.mergeBase(a, b); got != want {
				t.Fatalf("seed %d: mergeBase(%s, %s) = %s, want %s", seed, a, b, got, want)
			}
		}
	}
}
