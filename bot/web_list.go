package bot

// listFilterError is a filter of the list the server refuses (400).
type listFilterError struct{ msg string }

func (e *listFilterError) Error() string { return e.msg }
