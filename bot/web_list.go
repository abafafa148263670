package bot

import (
	"context"
	"errors"
	"net/url"

	"changebot/store"
)

// listFilterError is a filter of the list the server refuses (400).
type listFilterError struct{ msg string }

func (e *listFilterError) Error() string { return e.msg }

// listChanges answers the list page from the query parameters of GET
// /api/v1/changes: one page of changes and the cursor of the next ("" on
// the last page).
func (a *App) listChanges(_ context.Context, _ url.Values) ([]store.Operation, string, error) {
	return nil, "", errors.New("the list query is not wired yet")
}
