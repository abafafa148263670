package flows

import (
	"errors"
	"fmt"

	"changebot/flows/rules"
	"changebot/platform"
)

// failureDetail turns an error into text for people: the platform's status
// and message when there is one ("GitHub answered 405 Pull Request is not
// mergeable on PUT /repos/o/r/pulls/7/merge"), else the error's text.
func failureDetail(w rules.Words, err error) string {
	var pe *platform.Error
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s answered %s on %s %s", w.Platform, pe.Answer(), pe.Method, pe.Path)
	}
	return err.Error()
}
