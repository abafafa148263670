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

// NoteState is what a status note refresh checks before it renders: the
// operation's MR, the sequence number of its newest event and what the
// MR's recorded status note shows (NoteOperationID "" and RenderedSeq 0
// when no note is recorded). Read by StatusNotes.StatusNoteState in one
// statement.
type NoteState struct {
	// Platform is the operation's platform as stored.
	Platform         string
	ProjectID, MRIID int64
	// LastSeq is the sequence number of the operation's newest event (0
	// without events).
	LastSeq int64
	// NoteOperationID is the operation whose comment the MR's recorded
	// note holds; RenderedSeq the newest event rendered into it.
	NoteOperationID string
	RenderedSeq     int64
}

// Current reports whether the MR's recorded note shows the operation's
// newest event (or a newer render) for operation id.
func (n NoteState) Current(id string) bool {
	return n.NoteOperationID == id && n.RenderedSeq >= n.LastSeq
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
	// TakenOver reports that this claim replaced an expired one that was
	// neither recorded nor released: its refresh stopped midway (a crash,
	// or a note create whose outcome is unknown, which keeps its claim), so
	// the MR may hold a note the store does not know. A claim taken on a
	// free MR (every refresh that finished recorded or released its claim)
	// is not: a first note can then be created without looking for one.
	TakenOver bool
}
