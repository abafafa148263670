package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestMainExitCodes: the command line's own answers, with no bot behind it
// (Bot's functions are never called for these): help 0, a refused command
// line 2 with what was wrong, version the Bot's version.
func TestMainExitCodes(t *testing.T) {
	t.Parallel()
	b := Bot{Version: "changebot v9.9.9 (commit abc, go1.26)"}
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"help"}, 0, "Usage:", ""},
		{[]string{"version"}, 0, "changebot v9.9.9 (commit abc, go1.26)", ""},
		{[]string{"version", "x"}, 2, "", `unexpected argument "x"`},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{nil, 2, "", "Usage:"},
		{[]string{"demo", "-platform", "bitbucket"}, 2, "", `-platform "bitbucket": want gitlab or github`},
		{[]string{"demo", "-timeout", "0s"}, 2, "", "want a positive duration"},
		{[]string{"migrate", "-down", "-1"}, 2, "", "a version is 0 or more"},
		{[]string{"settings", "frob"}, 2, "", "want get or set"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			if code := Main(tc.args, &out, &errOut, b); code != tc.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tc.code, errOut.String())
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String(), tc.errOut) {
				t.Errorf("stdout %q, stderr %q; want %q and %q in them", out.String(), errOut.String(), tc.out, tc.errOut)
			}
		})
	}
}
