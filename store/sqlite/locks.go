package sqlite

import (
	"context"

	"changebot/store"
)

// SQLite has no row, table or advisory locks: every transaction of this
// driver begins IMMEDIATE (OpenDB) and holds the database's write lock
// until it ends, so no other writer runs meanwhile. The queries that lock
// on PostgreSQL are therefore plain reads here, and the locks it takes are
// nothing to take.

// OperationGetForUpdate implements store.OperationQueries: OperationGet.
func (x executor) OperationGetForUpdate(ctx context.Context, id string) (store.Operation, error) {
	return x.OperationGet(ctx, id)
}

// OperationStepStatusForUpdate implements store.OperationQueries: a plain
// read.
func (x executor) OperationStepStatusForUpdate(ctx context.Context, id string) (int, string, error) {
	r, err := queries.OperationStepStatus(ctx, x.ex, id)
	return r.Step, r.Status, noRows(err)
}

// BindingGetForUpdate implements store.OperationQueries: BindingGet.
func (x executor) BindingGetForUpdate(ctx context.Context, subjectID, targetKey string) (store.Binding, error) {
	return x.BindingGet(ctx, subjectID, targetKey)
}

// DeliveryLockUndispatched implements store.IntakeQueries: a plain read;
// no other dispatcher runs until the transaction ends.
func (x executor) DeliveryLockUndispatched(ctx context.Context, max int) ([]int64, error) {
	return queries.DeliveryListUndispatched(ctx, x.ex, int64(max))
}

// SettingsLock implements store.SettingQueries: nothing to take.
func (x executor) SettingsLock(context.Context) error { return nil }

// CopyTablesLock implements store.CopyQueries: nothing to take.
func (x executor) CopyTablesLock(context.Context, []string) error { return nil }
