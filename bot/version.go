package bot

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Stamped at build time with
//
//	go build -ldflags "-X changebot/bot.version=$(git describe --tags --always --dirty) -X changebot/bot.commit=$(git rev-parse HEAD)"
//
// (the Makefile's build target and the Dockerfile's VERSION and COMMIT
// build arguments). Left empty, BuildVersion falls back to what the Go
// toolchain recorded in the binary (runtime/debug.ReadBuildInfo).
var (
	version string
	commit  string
)

// BuildInfo says which build of changebot is running.
type BuildInfo struct {
	// Version is the ldflags-stamped version (git describe), else the main
	// module's version, else "devel".
	Version string
	// Commit is the stamped commit, else the VCS revision Go recorded
	// ("+dirty" appended when the tree was modified), else "unknown".
	Commit string
	// Go is the Go version that built the binary (runtime.Version).
	Go string
}

// BuildVersion returns this binary's BuildInfo.
func BuildVersion() BuildInfo {
	return buildVersion(version, commit, debug.ReadBuildInfo)
}

// buildVersion resolves the stamped values against the toolchain's build
// info (read is debug.ReadBuildInfo, injected by tests).
func buildVersion(stampedVersion, stampedCommit string, read func() (*debug.BuildInfo, bool)) BuildInfo {
	b := BuildInfo{Version: stampedVersion, Commit: stampedCommit, Go: runtime.Version()}
	if info, ok := read(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		if b.Commit == "" {
			var rev, modified string
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" && modified == "true" {
				rev += "+dirty"
			}
			b.Commit = rev
		}
		if info.GoVersion != "" {
			b.Go = info.GoVersion
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

// String is the one line `changebot version` prints.
func (b BuildInfo) String() string {
	return fmt.Sprintf("changebot %s (commit %s, %s)", b.Version, b.Commit, b.Go)
}

// registerBuildInfo exports changebot_build_info{version,commit,go} = 1.
func registerBuildInfo(reg prometheus.Registerer, b BuildInfo) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "changebot_build_info",
		Help: "Always 1; the labels say which build runs (version from git describe, commit, Go version)."},
		[]string{"version", "commit", "go"})
	g.WithLabelValues(b.Version, b.Commit, b.Go).Set(1)
	// A registry shared by several Apps (tests) keeps the first one.
	_ = reg.Register(g)
}
