package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestGitHubDemoInstructionsNameEveryToken: the kept GitHub demo prints
// the viewer token for the web pages and the reviewer accounts' tokens.
func TestGitHubDemoInstructionsNameEveryToken(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	printGitHubKeepInstructions(&out, Info{BotURL: "http://bot", GitLabURL: "http://gh", Project: Project, ProjectID: 7, MRIID: 1}, "at exit")
	for _, want := range []string{"viewer " + ViewerToken, "http://bot/ui", "log in with the viewer token " + ViewerToken,
		"reviewer tokens " + Reviewers[0].Token + " (" + Reviewers[0].Name + "), " + Reviewers[1].Token} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("instructions lack %q:\n%s", want, out.String())
		}
	}
}
