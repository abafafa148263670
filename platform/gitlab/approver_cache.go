package gitlab

import (
	"container/list"
	"slices"
	"sync"
)

// checklistCache keeps the approval checklist item ids of the most recently
// used projects (an LRU of at most max entries). It is safe for concurrent
// use; get and put copy the slices.
type checklistCache struct {
	mu   sync.Mutex
	max  int
	ll   *list.List // of *checklistEntry, most recently used first
	byID map[int64]*list.Element
}

type checklistEntry struct {
	projectID int64
	ids       []string
}

func newChecklistCache(size int) *checklistCache {
	if size <= 0 {
		size = DefaultChecklistCacheSize
	}
	return &checklistCache{max: size, ll: list.New(), byID: map[int64]*list.Element{}}
}

// get returns projectID's cached item ids.
func (c *checklistCache) get(projectID int64) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[projectID]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return slices.Clone(e.Value.(*checklistEntry).ids), true
}

// put stores projectID's item ids, evicting the least recently used project
// when the cache is full.
func (c *checklistCache) put(projectID int64, ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids = slices.Clone(ids)
	if e, ok := c.byID[projectID]; ok {
		e.Value.(*checklistEntry).ids = ids
		c.ll.MoveToFront(e)
		return
	}
	c.byID[projectID] = c.ll.PushFront(&checklistEntry{projectID: projectID, ids: ids})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.byID, last.Value.(*checklistEntry).projectID)
	}
}

// len reports how many projects are cached.
func (c *checklistCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
