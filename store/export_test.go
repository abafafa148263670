package store

// SetUpcaster registers up as the upcaster of schema version v for the
// length of a test; restore removes it. Tests using it must not run in
// parallel with tests that read events.
func SetUpcaster(v int, up func(Event) Event) (restore func()) {
	upcasters[v] = up
	return func() { delete(upcasters, v) }
}
