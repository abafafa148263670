package gitlab

import (
	"slices"
	"testing"
)

func TestChecklistCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := newChecklistCache(2)
	c.put(1, []string{"a"})
	c.put(2, []string{"b"})
	if _, ok := c.get(1); !ok { // 1 is now the most recently used
		t.Fatal("project 1 missing")
	}
	c.put(3, []string{"c"})
	if _, ok := c.get(2); ok {
		t.Error("project 2 kept; want it evicted as least recently used")
	}
	if c.len() != 2 {
		t.Errorf("len = %d; want 2", c.len())
	}
	c.put(1, []string{"a", "d"})
	got, ok := c.get(1)
	if !ok || !slices.Equal(got, []string{"a", "d"}) {
		t.Errorf("get(1) = %v, %v; want the replaced list", got, ok)
	}
	got[0] = "mutated"
	if again, _ := c.get(1); again[0] != "a" {
		t.Errorf("get returned the cached slice itself")
	}
	if newChecklistCache(0).max != DefaultChecklistCacheSize {
		t.Errorf("size 0 does not mean the default")
	}
}
