package store

// DBTX is where a store method runs its statements: the store's own handle
// (DB: each statement on its own, or in a transaction of its own where the
// method says so) or a transaction (Tx). Its concrete type belongs to the
// implementation that made it, which unwraps it; callers only hand it back
// to the same store. A handle of another implementation makes every
// statement fail with an error naming both engines.
type DBTX interface {
	// Engine names the implementation that made the handle ("postgres").
	Engine() string
}

// Tx is one transaction of a store, given to the function that InTx runs
// and valid only until that function returns. Store methods that take a
// DBTX accept it, so what they write commits or rolls back with the rest of
// the transaction (and the jobs they enqueue with it).
type Tx interface {
	DBTX
	// Transaction marks the handle as a transaction; it does nothing.
	Transaction()
}
