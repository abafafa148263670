package notify

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Destination kinds (the configuration's kind).
const (
	// KindWebhook POSTs the JSON Payload, signed (X-Changebot-Signature).
	KindWebhook = "webhook"
	// KindSlack POSTs Slack's incoming-webhook body {"text": "…"}, one
	// line per notification; the URL is the credential.
	KindSlack = "slack"
)

// Destination is one server-side notification destination, as the
// configuration file's notifications list gives it (issue 25 point 3).
// Secret (and a Slack URL, which is its own credential) never appear in
// String, GoString, LogValue or an error.
type Destination struct {
	// Name names the destination in the delivery log, the API and the
	// logs: letters, digits, '-', '_' and '.', unique.
	Name string
	// Kind is KindWebhook or KindSlack.
	Kind string
	// URL is where notifications are POSTed: http or https, with a host.
	URL string
	// Secret is the HMAC-SHA256 key of X-Changebot-Signature; required
	// for KindWebhook. The configuration gives it inline (secret) or by
	// the name of an environment variable (secret_env).
	Secret string
	// SecretEnv, when set, names the environment variable Secret was read
	// from (the configuration's secret_env); it is not secret.
	SecretEnv string
	// Projects select the changes routed here: each a project path glob
	// (path.Match: "platform/*" matches platform/infra but not
	// platform/a/b) or a numeric project id; empty means every project.
	Projects []string
	// Events select the events routed here; empty means every event.
	Events []Event
}

// namePattern is what a destination's name may hold.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate returns every problem of d, none quoting its secret or URL.
func (d Destination) Validate() []error {
	var errs []error
	if !namePattern.MatchString(d.Name) {
		errs = append(errs, errors.New("name: want 1 to 64 letters, digits, '.', '-' or '_', starting with a letter or digit"))
	}
	switch d.Kind {
	case KindWebhook:
		if d.Secret == "" {
			errs = append(errs, errors.New("secret: a webhook needs a secret (secret or secret_env) to sign with"))
		}
	case KindSlack:
	default:
		errs = append(errs, fmt.Errorf("kind: %q is not webhook or slack", d.Kind))
	}
	if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("url: want an http:// or https:// URL with a host"))
	}
	for i, p := range d.Projects {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, fmt.Errorf("projects: entry %d is empty", i+1))
		} else if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("projects: entry %d %q is not a valid glob", i+1, p))
		}
	}
	for i, e := range d.Events {
		if _, err := ParseEvent(string(e)); err != nil {
			errs = append(errs, fmt.Errorf("events: entry %d: %w", i+1, err))
		}
	}
	return errs
}

// Wants reports whether d takes event ev of a change of project (its
// path, as the platform answered it) and projectID.
func (d Destination) Wants(ev Event, project string, projectID int64) bool {
	if len(d.Events) > 0 && !slices.Contains(d.Events, ev) {
		return false
	}
	if len(d.Projects) == 0 {
		return true
	}
	for _, p := range d.Projects {
		if id, err := strconv.ParseInt(p, 10, 64); err == nil {
			if projectID != 0 && id == projectID {
				return true
			}
			continue
		}
		if ok, _ := path.Match(p, project); ok {
			return true
		}
	}
	return false
}

// String describes d without its secret: name, kind, the URL's scheme and
// host only (a path may hold a token, and a Slack URL is one), projects
// and events.
func (d Destination) String() string {
	host := redacted
	if u, err := url.Parse(d.URL); err == nil && u.Host != "" {
		host = u.Scheme + "://" + u.Host + "/…"
	}
	events := make([]string, len(d.Events))
	for i, e := range d.Events {
		events[i] = string(e)
	}
	secret := ""
	if d.Secret != "" {
		secret = " secret=" + redacted
	}
	return fmt.Sprintf("%s(%s %s projects=[%s] events=[%s]%s)", d.Name, d.Kind, host,
		strings.Join(d.Projects, ","), strings.Join(events, ","), secret)
}

// GoString is String, so that %#v cannot print the secret either.
func (d Destination) GoString() string { return d.String() }

// redacted stands for a secret in String.
const redacted = "[REDACTED]"

// ValidateDestinations returns every problem of dests, each prefixed with
// the entry's position and name; names must be unique.
func ValidateDestinations(dests []Destination) []string {
	var out []string
	seen := map[string]int{}
	for i, d := range dests {
		label := fmt.Sprintf("entry %d", i+1)
		if d.Name != "" {
			label += fmt.Sprintf(" (%s)", d.Name)
			if j, ok := seen[d.Name]; ok {
				out = append(out, fmt.Sprintf("%s: name: entry %d has the same name", label, j+1))
			} else {
				seen[d.Name] = i
			}
		}
		for _, err := range d.Validate() {
			out = append(out, fmt.Sprintf("%s: %v", label, err))
		}
	}
	return out
}
