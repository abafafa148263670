package gitlabfake

import (
	"fmt"
	"net/http"
	"unicode/utf8"
)

// GitLab's size limits on what a client writes, in characters (issue 10
// point 5; docs/gitlab.md): a note body (Note model, validates :note,
// length: { maximum: 1_000_000 }), an MR description (Issuable,
// DESCRIPTION_LENGTH_MAX = 1_048_576) and an MR title (Issuable,
// TITLE_LENGTH_MAX = 255).
const (
	MaxNoteChars        = 1_000_000
	MaxDescriptionChars = 1_048_576
	MaxTitleChars       = 255
)

// fieldLimit is one request parameter's limit and the model attribute
// GitLab names in its answer.
type fieldLimit struct {
	param, attr string
	max         int
}

var (
	noteLimit = fieldLimit{"body", "note", MaxNoteChars}
	mrLimits  = []fieldLimit{{"title", "title", MaxTitleChars}, {"description", "description", MaxDescriptionChars}}
)

// withinLimits answers 400 {"message":{"<attr>":["is too long (maximum is
// N characters)"]}}, as GitLab's model validation does, and reports false
// when a parameter is longer than its limit.
func (rc *reqCtx) withinLimits(limits ...fieldLimit) bool {
	for _, l := range limits {
		if v, ok := rc.str(l.param); ok && utf8.RuneCountInString(v) > l.max {
			rc.fail(http.StatusBadRequest, map[string][]string{
				l.attr: {fmt.Sprintf("is too long (maximum is %d characters)", l.max)}})
			return false
		}
	}
	return true
}
