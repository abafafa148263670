package bot

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBuildVersionFallsBack: ldflags-stamped values win; without them the
// version and commit come from the toolchain's build info (vcs.revision,
// "+dirty" when vcs.modified), and "devel"/"unknown" when it has none.
func TestBuildVersionFallsBack(t *testing.T) {
	t.Parallel()
	info := func(mainVersion string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "changebot", Version: mainVersion}, Settings: settings}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "abc123"}
	tests := []struct {
		name             string
		version, commit  string
		read             func() (*debug.BuildInfo, bool)
		wantVer, wantCom string
		wantGo           string
	}{
		{"stamped", "v1.2.0-3-gabc", "abc123def", info("(devel)", rev), "v1.2.0-3-gabc", "abc123def", "go1.26.8"},
		{"vcs info", "", "", info("(devel)", rev, debug.BuildSetting{Key: "vcs.modified", Value: "false"}), "devel", "abc123", "go1.26.8"},
		{"vcs info, dirty tree", "", "", info("(devel)", rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "devel", "abc123+dirty", "go1.26.8"},
		{"module version (go install)", "", "", info("v1.3.0"), "v1.3.0", "unknown", "go1.26.8"},
		{"nothing recorded", "", "", none, "devel", "unknown", runtime.Version()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := buildVersion(tc.version, tc.commit, tc.read)
			if got.Version != tc.wantVer || got.Commit != tc.wantCom || got.Go != tc.wantGo {
				t.Fatalf("buildVersion = %+v, want version %q commit %q go %q", got, tc.wantVer, tc.wantCom, tc.wantGo)
			}
		})
	}
}

// TestVersionCommandPrintsTheStampedVersion builds the binary the way the
// Makefile does (-ldflags -X) and runs `changebot version`.
func TestVersionCommandPrintsTheStampedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "changebot")
	build := exec.Command("go", "build", "-ldflags", "-X changebot/bot.version=v9.8.7-test -X changebot/bot.commit=0123abcd", "-o", bin, "../cmd/changebot")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("changebot version: %v", err)
	}
	want := "changebot v9.8.7-test (commit 0123abcd, " + runtime.Version() + ")\n"
	if string(out) != want {
		t.Fatalf("changebot version printed %q, want %q", out, want)
	}
}

// TestVersionSubcommand: `changebot version` exits 0 and prints one line
// naming the build.
func TestVersionSubcommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := cliMain([]string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if got, want := stdout.String(), BuildVersion().String()+"\n"; got != want || !strings.HasPrefix(got, "changebot ") {
		t.Fatalf("printed %q, want %q", got, want)
	}
}
