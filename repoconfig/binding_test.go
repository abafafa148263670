package repoconfig

import (
	"errors"
	"reflect"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		glob, path string
		match      bool
		captures   []string
	}{
		{"a/b.yaml", "a/b.yaml", true, []string{}},
		{"a/b.yaml", "a/bxyaml", false, nil},
		{"a/*.yaml", "a/x.yaml", true, []string{"x"}},
		{"a/*.yaml", "a/.yaml", true, []string{""}},
		{"a/*.yaml", "a/x/y.yaml", false, nil},
		{"a/?.yaml", "a/x.yaml", true, []string{"x"}},
		{"a/?.yaml", "a/xy.yaml", false, nil},
		{"a/?.yaml", "a//.yaml", false, nil},
		{"a/**/b", "a/b", true, []string{""}},
		{"a/**/b", "a/x/b", true, []string{"x"}},
		{"a/**/b", "a/x/y/b", true, []string{"x/y"}},
		{"a/**/b", "ab", false, nil},
		{"a/**", "a/x", true, []string{"x"}},
		{"a/**", "a/x/y", true, []string{"x/y"}},
		{"a/**", "a", false, nil},
		{"**/values.yaml", "values.yaml", true, []string{""}},
		{"**/values.yaml", "envs/prod/values.yaml", true, []string{"envs/prod"}},
		{"**", "any/path", true, []string{"any/path"}},
		{"envs/*/apps/*/**", "envs/prod/apps/web/k8s/deploy.yaml", true, []string{"prod", "web", "k8s/deploy.yaml"}},
		{"a.b/[x]+", "a.b/[x]+", true, []string{}},
		{"a.b/[x]+", "aXb/x", false, nil},
		{"a/*", "A/x", false, nil},
	}
	for _, tt := range tests {
		g, err := CompileGlob(tt.glob)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", tt.glob, err)
		}
		caps, ok := g.Match(tt.path)
		if ok != tt.match || (ok && !reflect.DeepEqual(caps, tt.captures)) {
			t.Errorf("%q.Match(%q) = %q, %v; want %q, %v", tt.glob, tt.path, caps, ok, tt.captures, tt.match)
		}
		if ok && g.Wildcards() != len(caps) {
			t.Errorf("%q: Wildcards() = %d, captures %d", tt.glob, g.Wildcards(), len(caps))
		}
	}
}

func TestCompileGlobRefuses(t *testing.T) {
	t.Parallel()
	for _, glob := range []string{"", "a**", "a/**b/c", "***"} {
		if _, err := CompileGlob(glob); err == nil {
			t.Errorf("CompileGlob(%q) = nil error, want one", glob)
		}
	}
}

func TestBinding(t *testing.T) {
	t.Parallel()
	p := Policy{Version: 1, Paths: []PathRule{
		{Match: "envs/*/apps/*/**", Subject: "app/{2}", Target: "{1}"},
		{Match: "envs/*/shared.yaml", Subject: "shared", Target: "{1}"},
		{Match: "docs/**", Subject: "docs", Target: "all"},
		{Match: "envs/prod/apps/web/README.md", Subject: "never", Target: "reached"}, // shadowed by rule 1
	}}
	tests := []struct {
		name            string
		paths           []string
		subject, target string
		err             *NoBindingError
	}{
		{"one path", []string{"envs/prod/apps/web/values.yaml"}, "app/web", "prod", nil},
		{"paths of one binding", []string{"envs/prod/apps/web/values.yaml", "envs/prod/apps/web/k8s/d.yaml"}, "app/web", "prod", nil},
		{"first matching rule wins", []string{"envs/prod/apps/web/README.md"}, "app/web", "prod", nil},
		{"no paths", nil, "", "", &NoBindingError{}},
		{"a path no rule matches", []string{"envs/prod/apps/web/values.yaml", "README.md", "Makefile", "README.md"}, "", "", &NoBindingError{Unmatched: []string{"Makefile", "README.md"}}},
		{"different bindings", []string{"envs/prod/apps/web/a", "envs/prod/apps/web/b", "envs/stage/apps/web/a", "envs/prod/shared.yaml"}, "", "", &NoBindingError{Conflicting: []PathBinding{
			{Path: "envs/prod/apps/web/a", Subject: "app/web", Target: "prod"},
			{Path: "envs/stage/apps/web/a", Subject: "app/web", Target: "stage"},
			{Path: "envs/prod/shared.yaml", Subject: "shared", Target: "prod"},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			subject, target, err := p.Binding(tt.paths)
			if tt.err == nil {
				if err != nil || subject != tt.subject || target != tt.target {
					t.Fatalf("Binding = %q, %q, %v; want %q, %q", subject, target, err, tt.subject, tt.target)
				}
				return
			}
			var nb *NoBindingError
			if !errors.As(err, &nb) || !reflect.DeepEqual(nb, tt.err) || subject != "" || target != "" {
				t.Fatalf("Binding = %q, %q, %#v; want %#v", subject, target, err, tt.err)
			}
		})
	}
}

func TestNoBindingErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *NoBindingError
		want string
	}{
		{&NoBindingError{}, "the merge request changes no path"},
		{&NoBindingError{Unmatched: []string{"a", "b"}}, "no path rule of .changebot.yml matches a, b"},
		{&NoBindingError{Conflicting: []PathBinding{{"x/a", "s", "t"}, {"y/b", "s", "u"}}},
			`the changed paths give different bindings: x/a gives subject "s" target "t"; y/b gives subject "s" target "u"`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestParsedPolicyBinds runs Binding over a policy Parse read, placeholders
// included, as the adoption of a merge request does.
func TestParsedPolicyBinds(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte("version: 1\npaths:\n  - match: 'clusters/*/**/*.yaml'\n    subject: '{3}'\n    target: 'cluster-{1}'\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, tg, err := p.Binding([]string{"clusters/eu1/ns/app/ingress.yaml"})
	if err != nil || s != "ingress" || tg != "cluster-eu1" {
		t.Fatalf("Binding = %q, %q, %v; want ingress, cluster-eu1", s, tg, err)
	}
}
