package flows

import "testing"

func TestCommonDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{"one file at the root", []string{"a.yaml"}, ""},
		{"one file in a directory", []string{"a/b/c.yaml"}, "a/b"},
		{"siblings", []string{"a/b/c.yaml", "a/b/d.yaml"}, "a/b"},
		{"one deeper", []string{"a/b/c.yaml", "a/b/d/e.yaml"}, "a/b"},
		{"a file in the common directory's parent", []string{"a/b/c.yaml", "a/x.yaml"}, "a"},
		{"no common directory", []string{"a/b.yaml", "c/d.yaml"}, ""},
		{"same prefix, different directory", []string{"ab/c.yaml", "a/c.yaml"}, ""},
	}
	for _, tt := range tests {
		if got := commonDir(tt.paths); got != tt.want {
			t.Errorf("%s: commonDir(%q) = %q; want %q", tt.name, tt.paths, got, tt.want)
		}
	}
}
