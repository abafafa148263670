package repoconfig

import (
	"fmt"
	"slices"
	"strings"
)

// PathBinding is the binding one changed path gets from the path rules.
type PathBinding struct {
	// Path is the changed path.
	Path string
	// Subject and Target are the binding its first matching rule gives.
	Subject, Target string
}

// NoBindingError is Binding's error: why a merge request's changed paths
// give no single binding. Exactly one of its cases holds: no paths at all,
// paths no rule matches (Unmatched), or paths whose rules give different
// bindings (Conflicting, one path per binding).
type NoBindingError struct {
	// Unmatched are the changed paths no rule matches, sorted.
	Unmatched []string
	// Conflicting are the different bindings the paths give, one example
	// path each, in the order of the paths given.
	Conflicting []PathBinding
}

// Error says why, naming the paths.
func (e *NoBindingError) Error() string {
	switch {
	case len(e.Unmatched) > 0:
		return fmt.Sprintf("no path rule of %s matches %s", FileName, strings.Join(e.Unmatched, ", "))
	case len(e.Conflicting) > 0:
		parts := make([]string, len(e.Conflicting))
		for i, b := range e.Conflicting {
			parts[i] = fmt.Sprintf("%s gives subject %q target %q", b.Path, b.Subject, b.Target)
		}
		return "the changed paths give different bindings: " + strings.Join(parts, "; ")
	}
	return "the merge request changes no path"
}

// PathBinding returns the binding path gets from the first rule whose
// glob matches it, and false when no rule matches.
func (p Policy) PathBinding(path string) (PathBinding, bool) {
	for _, r := range p.Paths {
		g, err := CompileGlob(r.Match)
		if err != nil {
			continue // Parse refuses such a rule; a hand-built one never matches.
		}
		if caps, ok := g.Match(path); ok {
			return PathBinding{Path: path, Subject: expand(r.Subject, caps), Target: expand(r.Target, caps)}, true
		}
	}
	return PathBinding{}, false
}

// Binding returns the one (subject, target) every changed path maps to by
// its first matching rule: the binding of a developer's merge request
// (issue 25 points 1 and 2). The error is a *NoBindingError when there are
// no paths, a path no rule matches, or paths that map to different
// bindings.
func (p Policy) Binding(paths []string) (subject, target string, err error) {
	if len(paths) == 0 {
		return "", "", &NoBindingError{}
	}
	var unmatched []string
	var seen []PathBinding
	for _, path := range paths {
		b, ok := p.PathBinding(path)
		if !ok {
			unmatched = append(unmatched, path)
			continue
		}
		if !slices.ContainsFunc(seen, func(s PathBinding) bool { return s.Subject == b.Subject && s.Target == b.Target }) {
			seen = append(seen, b)
		}
	}
	if len(unmatched) > 0 {
		slices.Sort(unmatched)
		return "", "", &NoBindingError{Unmatched: slices.Compact(unmatched)}
	}
	if len(seen) > 1 {
		return "", "", &NoBindingError{Conflicting: seen}
	}
	return seen[0].Subject, seen[0].Target, nil
}
