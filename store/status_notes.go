package store

// StatusNote records which MR note holds an operation's status comment
// (DESIGN §7) and the last event sequence rendered into it.
type StatusNote struct {
	// Platform is the request's platform (store.PlatformOr applies).
	Platform    string
	ProjectID   int64
	MRIID       int64
	NoteID      int64
	OperationID string
	RenderedSeq int64
}

// NoteClaim is the right, for a while, to write the status note of one MR:
// a refresh claims it, calls GitLab holding no transaction or lock, then
// records the note and releases it (RecordStatusNote, ReleaseStatusNote).
type NoteClaim struct {
	// Platform is the request's platform (store.PlatformOr applies).
	Platform         string
	ProjectID, MRIID int64
	// Token identifies this claim; a claim taken over after it expired
	// has another.
	Token string
}
