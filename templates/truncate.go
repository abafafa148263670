package templates

import (
	"strings"
	"unicode/utf8"
)

// GitLab's limits on what the bot writes, in characters (docs/gitlab.md;
// Note: validates :note, length: { maximum: 1_000_000 }; Issuable:
// DESCRIPTION_LENGTH_MAX = 1_048_576). GitLab answers 400 to a longer note
// or merge request description.
const (
	MaxNoteChars        = 1_000_000
	MaxDescriptionChars = 1_048_576
)

// MaxGitHubBodyChars is GitHub's limit on a pull request body and on an
// issue comment, in characters (docs/github.md): a longer one answers 422
// "Validation Failed" with "body is too long (maximum is 65536
// characters)".
const MaxGitHubBodyChars = 65_536

// platformGitHub is the Platform value of a change on GitHub (the views'
// Platform, store.PlatformGitHub).
const platformGitHub = "github"

// MaxNoteCharsOn is the longest comment platform accepts: MaxGitHubBodyChars
// on "github", GitLab's MaxNoteChars on anything else ("gitlab", "").
func MaxNoteCharsOn(platform string) int {
	if platform == platformGitHub {
		return MaxGitHubBodyChars
	}
	return MaxNoteChars
}

// MaxDescriptionCharsOn is the longest merge request description (pull
// request body) platform accepts: MaxGitHubBodyChars on "github", GitLab's
// MaxDescriptionChars on anything else.
func MaxDescriptionCharsOn(platform string) int {
	if platform == platformGitHub {
		return MaxGitHubBodyChars
	}
	return MaxDescriptionChars
}

// TruncatedPrefix starts the line Truncate ends a shortened text with.
const TruncatedPrefix = "…truncated; full history at "

// Truncate returns s unchanged when it has at most maxChars characters
// (runes). Otherwise it cuts s at a character boundary and ends it with a
// visible line "…truncated; full history at <historyURL>" (closing a
// <details> block the cut left open, so the line is not hidden), the whole
// at most maxChars characters. historyURL may be empty ("the changebot
// API" is named instead). maxChars must leave room for that line.
func Truncate(s string, maxChars int, historyURL string) string {
	if utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	where := historyURL
	if where == "" {
		where = "the changebot API"
	}
	tail := "\n\n" + TruncatedPrefix + where + "\n"
	room := maxChars - utf8.RuneCountInString(tail) - len("\n\n</details>")
	if room < 0 {
		room = 0
	}
	kept := s
	for i := range s { // i is the byte offset of the room-th rune
		if room == 0 {
			kept = s[:i]
			break
		}
		room--
	}
	kept = strings.TrimRight(kept, " \t\r\n")
	if strings.Count(kept, "<details>") > strings.Count(kept, "</details>") {
		kept += "\n\n</details>"
	}
	return kept + tail
}
