package githubfake

import (
	"fmt"
	"unicode/utf8"
)

// MaxBodyChars is GitHub's limit on the body of a pull request and of an
// issue comment, in characters (docs/github.md; GitHub answers 422
// "Validation Failed" with "body is too long (maximum is 65536
// characters)"), as gitlabfake enforces GitLab's limits.
const MaxBodyChars = 65_536

// bodyWithinLimit answers 422 Validation Failed, naming resource's body,
// and reports false when the request's body field is longer than
// MaxBodyChars characters.
func (rc *reqCtx) bodyWithinLimit(resource string) bool {
	if v, ok := rc.body["body"].(string); ok && utf8.RuneCountInString(v) > MaxBodyChars {
		rc.invalid(resource, "body", "custom", fmt.Sprintf("body is too long (maximum is %d characters)", MaxBodyChars))
		return false
	}
	return true
}
