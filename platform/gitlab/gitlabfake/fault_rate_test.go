package gitlabfake

import "testing"

// TestFaultRate: a fault with a Rate fails about that share of matching
// calls and lets the others run.
func TestFaultRate(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	e.srv.InjectFault(Fault{PathPattern: "/api/v4/user", Status: 503, Rate: .2})
	const calls = 1000
	failed := 0
	for range calls {
		st, _, _ := e.call("GET", "/user", robotToken, nil)
		switch st {
		case 503:
			failed++
		case 200:
		default:
			t.Fatalf("status %d", st)
		}
	}
	if failed < calls/10 || failed > calls*3/10 {
		t.Fatalf("%d of %d calls failed, want about 20%%", failed, calls)
	}
}
