package store

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Export reads the installation (CopyTables and the unfinished jobs) in one
// transaction that sees a single moment (Driver.ReadTx), so every table is
// of the same moment. A table whose columns are not the ones CopyTables
// lists is refused (*SchemaMismatchError), and so is a table the copy does
// not know (*UnknownTableError).
func (s *DriverStore) Export(ctx context.Context) (*Snapshot, error) {
	snap := &Snapshot{Rows: map[string][][]any{}}
	err := s.d.ReadTx(ctx, func(tx Tx) error {
		x, err := s.d.Executor(tx)
		if err != nil {
			return err
		}
		tables, err := x.CopyTableNames(ctx)
		if err != nil {
			return fmt.Errorf("listing the tables: %w", err)
		}
		if err := CheckTables(tables); err != nil {
			return err
		}
		for _, t := range CopyTables {
			have, err := x.CopyTableColumns(ctx, t.Name)
			if err != nil {
				return fmt.Errorf("reading the columns of %s: %w", t.Name, err)
			}
			if err := CheckColumns(t, have); err != nil {
				return err
			}
			if snap.Rows[t.Name], err = x.CopyTableRead(ctx, t); err != nil {
				return fmt.Errorf("reading %s: %w", t.Name, err)
			}
		}
		snap.Jobs, err = listCopyJobs(ctx, x)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("exporting from %s: %w", s.d.Name(), err)
	}
	return snap, nil
}

// Import writes snap into this database in one transaction: nothing is
// written unless all is. The tables are locked first (CopyTablesLock), so
// nothing may start writing while the copy checks and fills. The database
// must be migrated and empty: a table of CopyTables, IgnoredTables or
// River's jobs holding a row refuses it (*NotEmptyError). Jobs go through
// River's InsertMany (CopyJobParams, CheckCopiedJobs). The engine's
// counters (delivery and audit ids, commit claim tokens) are moved past the
// copied values (CopyCountersReset).
func (s *DriverStore) Import(ctx context.Context, snap *Snapshot) error {
	err := s.inTx(ctx, func(_ Tx, x Executor) error {
		names := []string{JobsTable}
		names = append(names, IgnoredTables...)
		for _, t := range CopyTables {
			names = append(names, t.Name)
		}
		if err := x.CopyTablesLock(ctx, names); err != nil {
			return fmt.Errorf("locking the tables: %w", err)
		}
		full := map[string]int{}
		for _, n := range names {
			c, err := x.CopyTableCount(ctx, n)
			if err != nil {
				return fmt.Errorf("counting the rows of %s: %w", n, err)
			}
			if c > 0 {
				full[n] = c
			}
		}
		if len(full) > 0 {
			return &NotEmptyError{Rows: full}
		}
		for _, t := range CopyTables {
			if rows := snap.Rows[t.Name]; len(rows) > 0 {
				if err := x.CopyTableWrite(ctx, t, rows); err != nil {
					return fmt.Errorf("writing %s: %w", t.Name, err)
				}
			}
		}
		if err := x.CopyCountersReset(ctx); err != nil {
			return fmt.Errorf("moving the counters past the copied rows: %w", err)
		}
		return insertCopyJobs(ctx, x, snap.Jobs)
	})
	if err != nil {
		return fmt.Errorf("importing into %s: %w", s.d.Name(), err)
	}
	return nil
}

// listCopyJobs lists, in the transaction of x through River's API, the jobs
// a copy carries (CopyJobStates) in id order, 1,000 a page.
func listCopyJobs(ctx context.Context, x Executor) ([]*rivertype.JobRow, error) {
	var out []*rivertype.JobRow
	p := river.NewJobListParams().States(CopyJobStates...).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1000)
	for {
		res, err := x.JobList(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("listing unfinished jobs: %w", err)
		}
		out = append(out, res.Jobs...)
		if len(res.Jobs) < 1000 {
			return out, nil
		}
		p = p.After(river.JobListCursorFromJob(res.Jobs[len(res.Jobs)-1]))
	}
}

// insertCopyJobs inserts jobs in the transaction of x through River's
// InsertMany (CopyJobParams) and checks them (CheckCopiedJobs).
func insertCopyJobs(ctx context.Context, x Executor, jobs []*rivertype.JobRow) error {
	if len(jobs) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = CopyJobParams(j)
	}
	res, err := x.JobInsertMany(ctx, params)
	if err != nil {
		return fmt.Errorf("inserting %d jobs: %w", len(jobs), err)
	}
	return CheckCopiedJobs(jobs, res)
}

// CopyScanTarget returns a new variable that a column of kind k scans into,
// for a driver's CopyTableRead: *string, **string (NullText), *int64, *bool,
// *float64, *time.Time, **time.Time (NullTime) or *[]byte (JSON, NullJSON,
// Bytes). CopyValue reads it.
func CopyScanTarget(k ColumnKind) any {
	switch k {
	case KindText:
		return new(string)
	case KindNullText:
		return new(*string)
	case KindInt:
		return new(int64)
	case KindBool:
		return new(bool)
	case KindFloat:
		return new(float64)
	case KindTime:
		return new(time.Time)
	case KindNullTime:
		return new(*time.Time)
	default: // JSON, NullJSON, Bytes
		return new([]byte)
	}
}

// CopyValue returns the Snapshot value of a column of kind k scanned into
// target (CopyScanTarget): the Go type its ColumnKind names, times in UTC,
// nil for NULL; a NULL of kind JSON or Bytes is empty bytes.
func CopyValue(k ColumnKind, target any) any {
	switch d := target.(type) {
	case *string:
		return *d
	case **string:
		if *d == nil {
			return nil
		}
		return **d
	case *int64:
		return *d
	case *bool:
		return *d
	case *float64:
		return *d
	case *time.Time:
		return d.UTC()
	case **time.Time:
		if *d == nil {
			return nil
		}
		return (*d).UTC()
	case *[]byte:
		if *d == nil && k == KindNullJSON {
			return nil
		}
		if *d == nil {
			return []byte{}
		}
		return *d
	}
	panic(fmt.Sprintf("store: no snapshot value for %T", target))
}
