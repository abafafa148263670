package database

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteLockFollowsSymlinks: a second serve given another name of one
// SQLite file, a symlink to the file or to its directory, is refused as
// the same name is (issue 21.12); without resolving the path each name had
// a lock of its own and two replicas wrote one file.
func TestSQLiteLockFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "data")
	if err := os.Mkdir(real, 0o750); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(real, "changebot.db")
	first, err := Open(context.Background(), "sqlite://"+file, &OpenOpts{Exclusive: true})
	if err != nil {
		t.Fatalf("first open: %v", err)
	}
	defer first.Close()

	fileLink := filepath.Join(dir, "link.db")
	if err := os.Symlink(file, fileLink); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(dir, "datalink")
	if err := os.Symlink(real, dirLink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path string }{
		{"the same name", file},
		{"a symlink to the file", fileLink},
		{"a symlink to its directory", filepath.Join(dirLink, "changebot.db")},
		{"a name with a dot-dot", filepath.Join(real, "..", "data", "changebot.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Open(context.Background(), "sqlite://"+tc.path, &OpenOpts{Exclusive: true})
			if err == nil {
				d.Close()
				t.Fatalf("second open of %s succeeded while the first holds the lock", tc.path)
			}
			if !errors.Is(err, ErrSecondProcess) {
				t.Fatalf("second open of %s: %v, want ErrSecondProcess", tc.path, err)
			}
		})
	}
}
