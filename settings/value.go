package settings

import (
	"encoding/json"
	"fmt"
	"time"
)

// Sources of a Value.
const (
	// SourceStored: a row of the settings table (set by an operator).
	SourceStored = "stored"
	// SourceConfig: the config file's "settings:" map.
	SourceConfig = "config"
	// SourceDefault: the registry default.
	SourceDefault = "default"
)

// Value is the effective value of one setting and where it came from. The
// typed accessors return the zero value when called for another kind.
type Value struct {
	Key  string
	Kind Kind
	// Scope is "global" or "project:<id or path>"; config and default
	// values are global.
	Scope string
	// Source is SourceStored, SourceConfig or SourceDefault.
	Source string
	// UpdatedBy and UpdatedAt are set for stored values only.
	UpdatedBy string
	UpdatedAt time.Time
	raw       json.RawMessage
	v         any
}

// JSON returns the value as JSON (a boolean, an integer or a string).
func (v Value) JSON() json.RawMessage { return v.raw }

// Bool returns a KindBool value.
func (v Value) Bool() bool { b, _ := v.v.(bool); return b }

// Int returns a KindInt value.
func (v Value) Int() int { n, _ := v.v.(int); return n }

// Duration returns a KindDuration value.
func (v Value) Duration() time.Duration { d, _ := v.v.(time.Duration); return d }

// String returns a KindEnum value as is, and any other kind in the config
// file's text form ("true", "8", "30s").
func (v Value) String() string {
	switch x := v.v.(type) {
	case string:
		return x
	case nil:
		return ""
	case time.Duration:
		var s string
		if json.Unmarshal(v.raw, &s) == nil {
			return s
		}
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}
