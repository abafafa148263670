package templates

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStatusTruncated (issue 10 point 5): a status comment longer than
// GitLab's note limit is cut to the limit and ends with a visible
// "…truncated; full history at <link>" outside the timeline's <details>;
// the marker stays its first line. The golden file shows the shape with a
// small limit; a long timeline against the real limit checks the size.
func TestStatusTruncated(t *testing.T) {
	t.Parallel()
	v := base()
	v.Status, v.StepCode, v.StepName, v.Seq = "MERGING", 10101, "HANDLE_STARTED", 3000
	v.HistoryURL = "https://changebot.example.com/api/v1/changes/" + v.OperationID
	for i := range 5000 {
		v.Timeline = append(v.Timeline, TimelineEntry{At: at(i), StepName: "HANDLE_PIPELINE_PENDING", Status: "MERGING",
			What: "resumed by " + strings.Repeat("é", 200), Actor: "olivia", Source: "reconciler"})
	}
	small, err := NewRenderer(&RendererOpts{MaxStatusChars: 1500})
	if err != nil {
		t.Fatal(err)
	}
	got, err := small.Status(v)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "status_truncated", got)

	r := setup(t)
	for _, c := range []struct {
		name  string
		limit int
		r     *Renderer
	}{{"small limit", 1500, small}, {"GitLab's limit", MaxNoteChars, r}} {
		got, err := c.r.Status(v)
		if err != nil {
			t.Fatal(err)
		}
		if n := utf8.RuneCountInString(got); n > c.limit || n < c.limit-300 {
			t.Errorf("%s: %d characters, want at most %d and not much less", c.name, n, c.limit)
		}
		if id, ok := ParseMarker(got); !ok || id != v.OperationID {
			t.Errorf("%s: the marker is lost: %q %v", c.name, id, ok)
		}
		if !strings.HasSuffix(got, "\n\n</details>\n\n"+TruncatedPrefix+v.HistoryURL+"\n") {
			t.Errorf("%s: does not end with the visible truncation line: %q", c.name, got[len(got)-200:])
		}
	}
	// Within the limit nothing is cut.
	v.Timeline = v.Timeline[:3]
	if got, _ := r.Status(v); strings.Contains(got, TruncatedPrefix) {
		t.Errorf("a short comment was truncated:\n%s", got)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		max      int
		url      string
		want     string
	}{
		{"fits", "abc", 3, "u", "abc"},
		{"cut at characters", strings.Repeat("é", 300), 120, "https://x/c/1",
			strings.Repeat("é", 120-len("\n\n</details>")-utf8.RuneCountInString("\n\n"+TruncatedPrefix+"https://x/c/1\n")) + "\n\n" + TruncatedPrefix + "https://x/c/1\n"},
		{"no link", strings.Repeat("a", 300), 120, "", strings.Repeat("a", 120-len("\n\n</details>")-utf8.RuneCountInString("\n\n"+TruncatedPrefix+"the changebot API\n")) + "\n\n" + TruncatedPrefix + "the changebot API\n"},
	} {
		got := Truncate(c.in, c.max, c.url)
		if got != c.want {
			t.Errorf("%s: Truncate = %q, want %q", c.name, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > c.max {
			t.Errorf("%s: %d characters, over %d", c.name, n, c.max)
		}
	}
}
