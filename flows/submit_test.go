package flows

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"changebot/store"
)

func TestSubmitValidation(t *testing.T) {
	t.Parallel()
	valid := func() SubmitParams {
		return SubmitParams{SubjectID: "s", TargetKey: "k", Project: "g/r", Title: "t", RequestedBy: "alice",
			Files: []store.File{{Path: "a/b.yaml", Content: "x"}}}
	}
	tests := []struct {
		name   string
		mutate func(*SubmitParams)
		fields []string // fields that must be reported; none means valid
	}{
		{"valid", func(*SubmitParams) {}, nil},
		{"everything missing", func(p *SubmitParams) { *p = SubmitParams{} },
			[]string{"subject_id", "target_key", "project", "title", "requested_by", "files"}},
		{"title of 255 multibyte runes is fine", func(p *SubmitParams) { p.Title = strings.Repeat("€", 255) }, nil},
		{"title of 256 runes", func(p *SubmitParams) { p.Title = strings.Repeat("a", 256) }, []string{"title"}},
		{"absolute path", func(p *SubmitParams) { p.Files[0].Path = "/etc/passwd" }, []string{"files[0].path"}},
		{"parent path", func(p *SubmitParams) { p.Files[0].Path = "../x" }, []string{"files[0].path"}},
		{"unclean path", func(p *SubmitParams) { p.Files[0].Path = "a//b" }, []string{"files[0].path"}},
		{"dot", func(p *SubmitParams) { p.Files[0].Path = "." }, []string{"files[0].path"}},
		{".git", func(p *SubmitParams) { p.Files[0].Path = ".git/config" }, []string{"files[0].path"}},
		{".GIT nested", func(p *SubmitParams) { p.Files[0].Path = "sub/.GIT/config" }, []string{"files[0].path"}},
		{"control character", func(p *SubmitParams) { p.Files[0].Path = "a\nb" }, []string{"files[0].path"}},
		{"too long", func(p *SubmitParams) { p.Files[0].Path = strings.Repeat("a", 1025) }, []string{"files[0].path"}},
		{"duplicate", func(p *SubmitParams) { p.Files = append(p.Files, p.Files[0]) }, []string{"files[1].path"}},
		{"bad action", func(p *SubmitParams) { p.Files[0].Action = "chmod" }, []string{"files[0].action"}},
		{"newline in subject_id", func(p *SubmitParams) { p.SubjectID = "g4\ng5" }, []string{"subject_id"}},
		{"tab in target_key", func(p *SubmitParams) { p.TargetKey = "prod\t" }, []string{"target_key"}},
		{"escape in title", func(p *SubmitParams) { p.Title = "t\x1b[31mred" }, []string{"title"}},
		{"C1 control in title", func(p *SubmitParams) { p.Title = "t\u009b" }, []string{"title"}},
		{"bidi override in title", func(p *SubmitParams) { p.Title = "t\u202Egpj.exe" }, []string{"title"}},
		{"bidi isolate in subject_id", func(p *SubmitParams) { p.SubjectID = "s\u2066" }, []string{"subject_id"}},
		{"newline in project", func(p *SubmitParams) { p.Project = "g/r\n" }, []string{"project"}},
		{"escape in target_branch", func(p *SubmitParams) { p.TargetBranch = "main\x1b" }, []string{"target_branch"}},
		{"tab in a path", func(p *SubmitParams) { p.Files[0].Path = "a\tb" }, []string{"files[0].path"}},
		{"bidi override in a path", func(p *SubmitParams) { p.Files[0].Path = "a\u202Eb" }, []string{"files[0].path"}},
		{"multi-line description is fine", func(p *SubmitParams) { p.Description = "line 1\n\tline 2\r\n" }, nil},
		{"multi-line content is fine", func(p *SubmitParams) { p.Files[0].Content = "a:\n\tb\n" }, nil},
		{"valid .changebot.yml", func(p *SubmitParams) {
			p.Files[0] = store.File{Path: ".changebot.yml", Content: "version: 1\nqueue:\n  mode: \"on\"\n"}
		}, nil},
		{"invalid .changebot.yml", func(p *SubmitParams) {
			p.Files[0] = store.File{Path: ".changebot.yml", Content: "version: 1\nqueue:\n  mode: always\n"}
		},
			[]string{"files[0].content"}},
		{"deleting .changebot.yml is fine", func(p *SubmitParams) { p.Files[0] = store.File{Path: ".changebot.yml", Action: "delete"} }, nil},
		{"a .changebot.yml below the root is any file", func(p *SubmitParams) { p.Files[0] = store.File{Path: "sub/.changebot.yml", Content: "not: [yaml"} }, nil},
		{"rollout_id of 255 runes is fine", func(p *SubmitParams) { p.RolloutID = strings.Repeat("r", 255) }, nil},
		{"rollout_id of 256 runes", func(p *SubmitParams) { p.RolloutID = strings.Repeat("r", 256) }, []string{"rollout_id"}},
		{"slash in rollout_id", func(p *SubmitParams) { p.RolloutID = "fleet/tls" }, []string{"rollout_id"}},
		{"dot dot rollout_id", func(p *SubmitParams) { p.RolloutID = ".." }, []string{"rollout_id"}},
		{"blank rollout_id", func(p *SubmitParams) { p.RolloutID = "  " }, []string{"rollout_id"}},
		{"dots inside rollout_id are fine", func(p *SubmitParams) { p.RolloutID = "fleet.tls..2026" }, nil},
		{"newline in rollout_id", func(p *SubmitParams) { p.RolloutID = "ro\n1" }, []string{"rollout_id"}},
		{"bidi override in rollout_id", func(p *SubmitParams) { p.RolloutID = "ro\u202E" }, []string{"rollout_id"}},
		{"emoji with a zero-width joiner in title is fine", func(p *SubmitParams) { p.Title = "deploy \U0001F469\u200D\U0001F4BB" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := valid()
			tt.mutate(&p)
			err := p.Validate()
			if len(tt.fields) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a ValidationError, got %v", err)
			}
			got := map[string]bool{}
			for _, f := range ve.Fields {
				got[f.Field] = true
			}
			for _, f := range tt.fields {
				if !got[f] {
					t.Errorf("field %s not reported in %v", f, ve.Fields)
				}
			}
		})
	}
}

// TestValidateWordsForbiddenCharactersAlike: a control or bidirectional
// formatting character is named by its code point in one wording
// (textcheck.Problem) in a file path as in the other fields.
func TestValidateWordsForbiddenCharactersAlike(t *testing.T) {
	t.Parallel()
	p := SubmitParams{SubjectID: "s\u2066", TargetKey: "prod", Project: "g/r", Title: "t\x1b", RequestedBy: "alice",
		Files: []store.File{{Path: "a\tb", Content: "x"}, {Path: "c\u202Ed", Content: "x"}}}
	var ve *ValidationError
	if !errors.As(p.Validate(), &ve) {
		t.Fatalf("Validate = %v, want a ValidationError", p.Validate())
	}
	want := []FieldError{
		{"subject_id", "contains a bidirectional formatting character (U+2066)"},
		{"title", "contains a control character (U+001B)"},
		{"files[0].path", "contains a control character (U+0009)"},
		{"files[1].path", "contains a bidirectional formatting character (U+202E)"},
	}
	if !slices.Equal(ve.Fields, want) {
		t.Errorf("Validate fields = %q, want %q", ve.Fields, want)
	}
}

// TestRequestedByFollowsThePlatform: requested_by is checked against the
// username rules of the installation's platform and the problem names that
// platform: a GitHub installation no longer answers with GitLab's rules
// ("must be a GitLab username ... '.git' or '.atom'").
func TestRequestedByFollowsThePlatform(t *testing.T) {
	t.Parallel()
	tests := []struct {
		platform, user string
		want           string // a part of the problem; "" means valid
	}{
		{store.PlatformGitLab, "dev.a_b", ""},
		{"", "dev.a_b", ""},
		{store.PlatformGitLab, "-dev", "must be a GitLab username"},
		{store.PlatformGitLab, "dev.git", "must be a GitLab username"},
		{store.PlatformGitHub, "octo-cat", ""},
		{store.PlatformGitHub, "dev.a_b", "must be a GitHub username"},
		{store.PlatformGitHub, "-octo", "must be a GitHub username"},
		{store.PlatformGitHub, strings.Repeat("a", 40), "at most 39 characters"},
	}
	for _, tt := range tests {
		p := SubmitParams{SubjectID: "s", TargetKey: "k", Project: "g/r", Title: "t", RequestedBy: tt.user,
			Platform: tt.platform, Files: []store.File{{Path: "a/b.yaml", Content: "x"}}}
		err := p.Validate()
		var ve *ValidationError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s on %q: %v, want valid", tt.user, tt.platform, err)
		case tt.want == "":
		case !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "requested_by":
			t.Errorf("%s on %q: %v, want one requested_by problem", tt.user, tt.platform, err)
		case !strings.Contains(ve.Fields[0].Message, tt.want):
			t.Errorf("%s on %q: %q, want it to say %q", tt.user, tt.platform, ve.Fields[0].Message, tt.want)
		}
		if tt.platform == store.PlatformGitHub && err != nil && strings.Contains(err.Error(), "GitLab") {
			t.Errorf("%s on GitHub: %v speaks of GitLab", tt.user, err)
		}
	}
}

// TestProjectFollowsThePlatform: on GitHub the project must be "owner/name"
// or a numeric id (a bare "config" was answered 503 "GitLab could not
// answer"), refused naming GitHub; GitLab takes any path its checks then
// look up.
func TestProjectFollowsThePlatform(t *testing.T) {
	t.Parallel()
	tests := []struct {
		platform, project string
		bad               bool
	}{
		{store.PlatformGitLab, "config", false},
		{store.PlatformGitLab, "group/sub/repo", false},
		{store.PlatformGitHub, "octo-org/config.d", false},
		{store.PlatformGitHub, "octo_emu/re_po", false},
		{store.PlatformGitHub, "42", false},
		{store.PlatformGitHub, "config", true},
		{store.PlatformGitHub, "group/sub/repo", true},
		{store.PlatformGitHub, "/config", true},
		{store.PlatformGitHub, "owner/", true},
		{store.PlatformGitHub, "owner/na me", true},
		{store.PlatformGitHub, "0", true},
		{store.PlatformGitHub, "-7", true},
		{store.PlatformGitHub, "+7", true},
	}
	for _, tt := range tests {
		p := SubmitParams{SubjectID: "s", TargetKey: "k", Project: tt.project, Title: "t", RequestedBy: "alice",
			Platform: tt.platform, Files: []store.File{{Path: "a/b.yaml", Content: "x"}}}
		err := p.Validate()
		var ve *ValidationError
		switch {
		case !tt.bad && err != nil:
			t.Errorf("%q on %s: %v, want valid", tt.project, tt.platform, err)
		case !tt.bad:
		case !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "project":
			t.Errorf("%q on %s: %v, want one project problem", tt.project, tt.platform, err)
		case ve.Fields[0].Message != `must be a GitHub repository as "owner/name" or a numeric id`:
			t.Errorf("%q on %s: %q, want it to say owner/name or a numeric id", tt.project, tt.platform, ve.Fields[0].Message)
		}
	}
}

// TestSubmitDifferencesRolloutID: a repeat of an Idempotency-Key with
// another rollout_id (or none) differs in rollout_id; the same one does
// not.
func TestSubmitDifferencesRolloutID(t *testing.T) {
	t.Parallel()
	op := store.Operation{SubjectID: "s", TargetKey: "k", Project: "g/r", Title: "t", RequestedBy: "alice", RolloutID: "ro-1"}
	p := SubmitParams{SubjectID: "s", TargetKey: "k", Project: "g/r", Title: "t", RequestedBy: "alice"}
	tests := []struct {
		rollout string
		want    []string
	}{{"ro-1", nil}, {"ro-2", []string{"rollout_id"}}, {"", []string{"rollout_id"}}}
	for _, tt := range tests {
		p.RolloutID = tt.rollout
		if got := p.differences(op); !slices.Equal(got, tt.want) {
			t.Errorf("rollout_id %q against ro-1: differences %v, want %v", tt.rollout, got, tt.want)
		}
	}
}
