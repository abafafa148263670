package config

import (
	"fmt"
	"slices"
	"strings"

	"changebot/notify"
)

// notificationsVar documents the YAML-only "notifications:" list.
var notificationsVar = Var{YAML: "notifications",
	Description: "Notification destinations (docs/notifications.md): a list of {name, kind: webhook or slack, url, secret or secret_env, projects: [path globs or ids], events: [failed, needs_person, merged, applied]}. Secrets and Slack URLs are never printed."}

// notificationKeys are the keys of one notifications entry.
var notificationKeys = []string{"name", "kind", "url", "secret", "secret_env", "projects", "events"}

// yamlNotifications converts the "notifications:" list to destinations;
// secret_env is kept for resolveNotificationSecrets. Problems name the
// entry and key, never a value but a kind or an event.
func yamlNotifications(v any, label string, ps *problems) []notify.Destination {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		ps.addf("%s: want a list of destinations", label)
		return nil
	}
	out := make([]notify.Destination, 0, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		entry := fmt.Sprintf("%s: entry %d", label, i+1)
		if !ok {
			ps.addf("%s: want a map with name, kind, url, …", entry)
			continue
		}
		var d notify.Destination
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains(notificationKeys, k) {
				ps.addf("%s: unknown key %q (want %s)", entry, k, strings.Join(notificationKeys, ", "))
				continue
			}
			if k == "projects" || k == "events" {
				items, ok := yamlList(m[k])
				if !ok {
					ps.addf("%s: %s: want a list of single values", entry, k)
					continue
				}
				if k == "projects" {
					d.Projects = items
				} else {
					for _, it := range items {
						d.Events = append(d.Events, notify.Event(it))
					}
				}
				continue
			}
			s, ok := yamlScalar(m[k])
			if !ok {
				ps.addf("%s: %s: want a single value", entry, k)
				continue
			}
			s = strings.TrimSpace(s)
			switch k {
			case "name":
				d.Name = s
			case "kind":
				d.Kind = strings.ToLower(s)
			case "url":
				d.URL = s
			case "secret":
				d.Secret = s
			case "secret_env":
				d.SecretEnv = s
			}
		}
		out = append(out, d)
	}
	return out
}

// yamlList converts a YAML list of scalars (or one scalar) to strings.
func yamlList(v any) ([]string, bool) {
	if s, ok := yamlScalar(v); ok {
		return []string{strings.TrimSpace(s)}, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := yamlScalar(e)
		if !ok {
			return nil, false
		}
		out = append(out, strings.TrimSpace(s))
	}
	return out, true
}

// resolveNotificationSecrets reads the secret of each destination that
// names its environment variable (secret_env) through getenv.
func resolveNotificationSecrets(c *Config, getenv func(string) string, ps *problems) {
	for i := range c.Notifications {
		d := &c.Notifications[i]
		if d.SecretEnv == "" {
			continue
		}
		label := fmt.Sprintf("config file key %q: entry %d", notificationsVar.YAML, i+1)
		if d.Secret != "" {
			ps.addf("%s: give secret or secret_env, not both", label)
			continue
		}
		if d.Secret = strings.TrimSpace(getenv(d.SecretEnv)); d.Secret == "" {
			ps.addf("%s: secret_env %s is unset or empty", label, d.SecretEnv)
		}
	}
}

// validateNotifications reports the problems of the destinations.
func (c Config) validateNotifications(ps *problems) {
	for _, p := range notify.ValidateDestinations(c.Notifications) {
		ps.addf("config file key %q: %s", notificationsVar.YAML, p)
	}
}

// notificationsLogValue describes the destinations without their secrets
// (notify.Destination.String).
func (c Config) notificationsLogValue() []string {
	out := make([]string, len(c.Notifications))
	for i, d := range c.Notifications {
		out[i] = d.String()
	}
	return out
}
