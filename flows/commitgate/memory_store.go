package commitgate

import (
	"context"
	"sync"
	"time"
)

// MemoryStore is a Store held in process memory, for unit tests only: it is
// not shared between replicas and does not survive a restart, so it cannot
// provide the exclusivity production needs. It is safe for concurrent use.
type MemoryStore struct {
	mu     sync.Mutex
	next   int64
	claims map[Ref]memoryClaim
}

type memoryClaim struct {
	commit Commit
	token  int64
	at     time.Time
}

// NewMemoryStore returns an empty MemoryStore. For unit tests only.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{claims: make(map[Ref]memoryClaim)}
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, c Commit) (int64, Commit, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := s.claims[c.Ref]; ok {
		return 0, held.commit, false, nil
	}
	s.next++
	s.claims[c.Ref] = memoryClaim{commit: c, token: s.next, at: time.Now()}
	return s.next, Commit{}, true, nil
}

// ReleaseToken implements Store.
func (s *MemoryStore) ReleaseToken(_ context.Context, ref Ref, token int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.claims[ref]
	if !ok || held.token != token {
		return false, nil
	}
	delete(s.claims, ref)
	return true, nil
}

// SeedIfAbsent implements Store.
func (s *MemoryStore) SeedIfAbsent(_ context.Context, c Commit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.claims[c.Ref]; ok {
		return nil
	}
	s.next++
	s.claims[c.Ref] = memoryClaim{commit: c, token: s.next, at: time.Now()}
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, ref Ref) (Commit, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.claims[ref]
	return held.commit, ok, nil
}

// Count implements Store.
func (s *MemoryStore) Count(_ context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.claims), nil
}

// Held implements Store.
func (s *MemoryStore) Held(_ context.Context, ref Ref) (Held, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held, ok := s.claims[ref]
	if !ok {
		return Held{}, false, nil
	}
	return Held{Commit: held.commit, Token: held.token, ClaimedAt: held.at}, true, nil
}
