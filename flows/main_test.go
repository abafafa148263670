package flows_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs the package's tests eight at a time unless -parallel is
// given: they wait on PostgreSQL and the fake GitLab far more than they
// compute, so GOMAXPROCS (the default) leaves the machine idle while the
// suite takes minutes.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(m.Run())
}
