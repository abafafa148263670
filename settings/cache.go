package settings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"changebot/internal/textcheck"
	"changebot/store"
)

// Store is what the Cache needs from the store (implemented by
// *postgres.Store).
type Store interface {
	DB() store.DBTX
	ListSettings(ctx context.Context, db store.DBTX) ([]store.Setting, error)
	SaveSetting(ctx context.Context, p store.SaveSettingParams) (store.Setting, error)
	ListenSettings(ctx context.Context) (store.SettingsListener, error)
}

// DefaultTTL bounds how stale a replica's settings can be when a
// notification is missed (listener connection lost, or a row written
// without NOTIFY).
const DefaultTTL = 5 * time.Second

// CacheConfig wires a Cache.
type CacheConfig struct {
	Store Store
	// Initial are the config file's "settings:" values (key to text form);
	// NewCache validates them.
	Initial map[string]string
	// TTL is how often the cache reloads even without a notification;
	// zero means DefaultTTL.
	TTL    time.Duration
	Logger *slog.Logger
}

// Cache holds every stored setting in memory. Lookups read an immutable
// snapshot (no I/O, no goroutine, no lock); one listener goroutine per
// process, started by Start and stopped by Close or its context, replaces
// the snapshot when a SettingsChannel notification arrives and at least
// every TTL.
type Cache struct {
	st      Store
	initial map[string]Value
	ttl     time.Duration
	log     *slog.Logger
	snap    atomic.Pointer[snapshot]
	// failing is set while loads fail (reload logs the first failure only).
	failing atomic.Bool

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// snapshot is the parsed content of the settings table at one moment.
type snapshot struct {
	values   map[rowKey]Value
	loadedAt time.Time
}

type rowKey struct{ key, scope string }

// NewCache validates cfg (every problem of the initial values at once) and
// returns a cache holding no stored values yet: until Load or Start, lookups
// answer from the initial values and defaults.
func NewCache(cfg CacheConfig) (*Cache, error) {
	if cfg.Store == nil {
		return nil, errors.New("configuring settings: store is required")
	}
	initial, err := parseInitial(cfg.Initial)
	if err != nil {
		return nil, err
	}
	c := &Cache{st: cfg.Store, initial: initial, ttl: cfg.TTL, log: cfg.Logger}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.snap.Store(&snapshot{values: map[rowKey]Value{}})
	return c, nil
}

// Load reads the settings table now and replaces the snapshot. Stored
// values that no longer validate (a key removed or retyped since) are
// skipped with a warning, so their lookups fall back to config or default.
func (c *Cache) Load(ctx context.Context) error {
	rows, err := c.st.ListSettings(ctx, c.st.DB())
	if err != nil {
		return fmt.Errorf("loading settings: %w", err)
	}
	c.snap.Store(&snapshot{values: c.valuesOf(rows), loadedAt: time.Now()})
	return nil
}

// valuesOf parses stored rows into values by (key, scope); rows of unknown
// keys are skipped, rows that no longer validate are logged and skipped.
func (c *Cache) valuesOf(rows []store.Setting) map[rowKey]Value {
	values := make(map[rowKey]Value, len(rows))
	for _, r := range rows {
		d, ok := Lookup(r.Key)
		if !ok {
			continue
		}
		v, err := d.Parse(r.Value)
		if err != nil {
			c.log.Warn("ignoring stored setting", "key", r.Key, "scope", r.Scope, "err", err)
			continue
		}
		v.Scope, v.Source, v.UpdatedBy, v.UpdatedAt = r.Scope, SourceStored, r.UpdatedBy, r.UpdatedAt
		// Scope lower-cases the project: a row stored before that (or
		// by hand) in another case is the same project's.
		values[rowKey{r.Key, strings.ToLower(r.Scope)}] = v
	}
	return values
}

// Lookup returns the effective value of key for project ("" for the global
// value): project scope (never for a global-only key), then global, then
// the initial value, then the default. The error is an *UnknownKeyError for
// a key not in the registry.
func (c *Cache) Lookup(key, project string) (Value, error) {
	d, ok := Lookup(key)
	if !ok {
		return Value{}, &UnknownKeyError{Key: key}
	}
	return effective(c.snap.Load().values, c.initial, d, project), nil
}

// Get is Lookup for keys known to be registered (the Key constants); it
// panics on an unknown key, a programming error.
func (c *Cache) Get(key, project string) Value {
	v, err := c.Lookup(key, project)
	if err != nil {
		panic("settings: " + err.Error())
	}
	return v
}

// List returns the effective value of every setting for project ("" for
// the global values), in registry order.
func (c *Cache) List(project string) []Value {
	out := make([]Value, 0, len(registry))
	for _, d := range registry {
		out = append(out, c.Get(d.Key, project))
	}
	return out
}

// Set validates rawJSON for key and project (Validate) and stores it in
// project's scope ("" for global), audited and announced to every replica in
// one transaction, then reloads this cache so the caller reads its own
// write. A JSON null removes the stored value of that scope. Before
// storing, it reads the table again and checks the rules between settings
// (reserve below burst, short poll interval at most the long one, reconcile
// min_age below max_age, jobs.rescue_after below sweeper.after) with the
// values that would be in effect: in project's scope, or for a global
// change globally and in every project scope with its own value of either
// setting. The rules are checked inside the store's write, on the rows as
// stored then (store.SaveSettingParams.Check), so two writers of the two
// settings of one rule cannot each pass and together break it. A refused
// value changes nothing. Errors: *UnknownKeyError,
// *InvalidValueError, *GlobalOnlyError, *ConflictError (all of them joined
// when one write breaks several rules), or the store's.
func (c *Cache) Set(ctx context.Context, key, project string, rawJSON json.RawMessage, updatedBy string) error {
	v, err := Validate(key, project, rawJSON)
	if err != nil {
		return err
	}
	if strings.TrimSpace(updatedBy) == "" {
		return errors.New("setting " + key + ": updated_by is required")
	}
	// A control or bidirectional formatting character would make the
	// audit show another name than it stores.
	if msg := textcheck.Problem(updatedBy); msg != "" {
		return fmt.Errorf("setting %s: updated_by %s", key, msg)
	}
	check := func(stored []store.Setting) error {
		next := c.valuesOf(stored)
		if v.Key == "" { // null: the stored value of this scope goes
			delete(next, rowKey{key, Scope(project)})
		} else {
			v.Scope, v.Source = Scope(project), SourceStored
			next[rowKey{key, Scope(project)}] = v
		}
		if errs := checkRules(c.initial, next, key, project); len(errs) > 0 {
			return &refusedError{key: key, err: errors.Join(errs...)}
		}
		return nil
	}
	if _, err := c.st.SaveSetting(ctx, store.SaveSettingParams{Key: key, Scope: Scope(project), Value: v.JSON(),
		UpdatedBy: updatedBy, Check: check}); err != nil {
		if re := (*refusedError)(nil); errors.As(err, &re) {
			return re
		}
		return err
	}
	return c.Load(ctx)
}

// Start loads the settings once and starts the listener goroutine, which
// runs until ctx ends or Close is called. When that first load fails (the
// settings table is not readable yet: migrations not applied), the cache
// still starts, degraded: lookups answer from the initial values and
// defaults, and the goroutine retries the load every TTL. Start fails only
// when the cache is already started.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return errors.New("settings cache already started")
	}
	c.reload(ctx)
	ctx, cancel := context.WithCancel(ctx)
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(ctx, c.done)
	return nil
}

// Close stops the listener goroutine and waits for it. It is safe to call
// without Start and more than once.
func (c *Cache) Close() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel, c.done = nil, nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// run listens for notifications and reloads on each one and whenever TTL
// has passed since the last load. A lost listener connection is reopened at
// most once per TTL; the TTL reloads continue meanwhile.
func (c *Cache) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	var l store.SettingsListener
	defer func() {
		if l != nil {
			_ = l.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if l == nil {
			var err error
			if l, err = c.st.ListenSettings(ctx); err != nil {
				l = nil
				if ctx.Err() == nil {
					c.log.Warn("settings listener unavailable, relying on periodic reload", "err", err)
				}
			} else {
				c.reload(ctx) // catch what was missed while not listening
			}
		}
		next := c.snap.Load().loadedAt.Add(c.ttl)
		wctx, cancel := context.WithDeadline(ctx, next)
		var err error
		if l != nil {
			_, err = l.Wait(wctx)
		} else {
			<-wctx.Done()
			err = wctx.Err()
		}
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil, errors.Is(err, context.DeadlineExceeded):
			c.reload(ctx)
		default:
			c.log.Warn("settings listener lost", "err", err)
			_ = l.Close(ctx)
			l = nil
			c.reload(ctx)
		}
	}
}

// reload is Load that logs instead of failing: the previous snapshot stays
// in use, and its age keeps the next attempt one TTL away. Only the first of
// a run of failures is a warning (the others are debug lines), and the
// first success after them is logged, so that a table that stays unreadable
// does not log every TTL.
func (c *Cache) reload(ctx context.Context) {
	err := c.Load(ctx)
	switch {
	case err == nil:
		if c.failing.Swap(false) {
			c.log.Info("settings loaded again")
		}
	case ctx.Err() != nil:
	default:
		if c.failing.Swap(true) {
			c.log.Debug("reloading settings", "err", err)
		} else {
			c.log.Warn("settings not readable, using the last values read (or config values and defaults) and retrying", "err", err, "retry_every", c.ttl)
		}
		old := c.snap.Load()
		c.snap.Store(&snapshot{values: old.values, loadedAt: time.Now()})
	}
}

// refusedError is a write Set refused because it breaks a rule between
// settings; it unwraps to the rules' *ConflictError values.
type refusedError struct {
	key string
	err error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("setting %s refused, nothing stored: %v", e.key, e.err)
}

func (e *refusedError) Unwrap() error { return e.err }
