package commands

import (
	"reflect"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	cmds := Registry()
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	wantNames := []string{"retry", "resume", "status", "cancel", "approve", "reject", "freeze", "unfreeze", "help", "merge"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("Registry names = %v, want %v", names, wantNames)
	}
	valid := map[Role]bool{RoleAnyone: true, RoleRequester: true, RoleAuthor: true, RoleDeveloper: true, RoleApprover: true, RoleOperator: true}
	for _, c := range cmds {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			if !validName.MatchString(c.Name) {
				t.Errorf("name %q does not match %s", c.Name, validName)
			}
			// "merge" runs where no change exists, where only commands
			// addressed to the robot by name are answered.
			if !strings.HasPrefix(c.Usage, "/"+c.Name) && c.Usage != "@changebot "+c.Name {
				t.Errorf("usage %q does not start with /%s", c.Usage, c.Name)
			}
			if c.Description == "" || c.WhoText == "" || len(c.Who) == 0 {
				t.Errorf("command %q lacks description, who or who text: %#v", c.Name, c)
			}
			for _, r := range c.Who {
				if !valid[r] {
					t.Errorf("command %q has unknown role %q", c.Name, r)
				}
			}
			// The usage line must parse back to the command itself.
			got := Parse(c.Usage, testBot)
			if len(got) != 1 || got[0].Name != c.Name {
				t.Errorf("Parse(%q) = %#v, want the command %q", c.Usage, got, c.Name)
			}
		})
	}
}

func TestRegistryReturnsFreshCopies(t *testing.T) {
	t.Parallel()
	a := Registry()
	a[0].Name = "changed"
	a[0].Who[0] = RoleOperator
	b := Registry()
	if b[0].Name != NameRetry || b[0].Who[0] != RoleRequester {
		t.Fatalf("modifying one Registry result changed the next: %#v", b[0])
	}
}

func TestRegistryRoles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		who          []Role
		changesState bool
	}{
		{name: NameRetry, who: []Role{RoleRequester, RoleAuthor, RoleDeveloper}, changesState: true},
		{name: NameResume, who: []Role{RoleOperator}, changesState: true},
		{name: NameStatus, who: []Role{RoleAnyone}},
		{name: NameCancel, who: []Role{RoleRequester, RoleOperator}, changesState: true},
		{name: NameApprove, who: []Role{RoleApprover}, changesState: true},
		{name: NameReject, who: []Role{RoleApprover}, changesState: true},
		{name: NameFreeze, who: []Role{RoleOperator}},
		{name: NameUnfreeze, who: []Role{RoleOperator}},
		{name: NameHelp, who: []Role{RoleAnyone}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, ok := Lookup(tc.name)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tc.name)
			}
			if !reflect.DeepEqual(c.Who, tc.who) || c.ChangesState != tc.changesState {
				t.Errorf("%s: who %v changes state %v, want %v %v", tc.name, c.Who, c.ChangesState, tc.who, tc.changesState)
			}
		})
	}
}

func TestLookupAndKnown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		known bool
	}{
		{name: "plain name", in: "retry", known: true},
		{name: "upper case", in: "RESUME", known: true},
		{name: "with slash", in: "/help", known: true},
		{name: "unknown", in: "retry-later", known: false},
		{name: "empty", in: "", known: false},
		{name: "slash only", in: "/", known: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Known(tc.in); got != tc.known {
				t.Errorf("Known(%q) = %v, want %v", tc.in, got, tc.known)
			}
			c, ok := Lookup(tc.in)
			if ok != tc.known || ok && c.Name != strings.ToLower(strings.TrimPrefix(tc.in, "/")) {
				t.Errorf("Lookup(%q) = %#v, %v", tc.in, c, ok)
			}
		})
	}
}

func TestHelpMarkdown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmds []Command
		want string
	}{
		{
			name: "empty",
			want: "| command | what it does | who |\n| --- | --- | --- |\n",
		},
		{
			name: "one command",
			cmds: []Command{{Name: "status", Usage: "/status", Description: "Show it.", WhoText: "anyone"}},
			want: "| command | what it does | who |\n| --- | --- | --- |\n| `/status` | Show it. | anyone |\n",
		},
		{
			name: "pipes and line breaks are escaped",
			cmds: []Command{{Name: "x", Usage: "/x a|b", Description: "one\ntwo\r\nthree", WhoText: "a | b"}},
			want: "| command | what it does | who |\n| --- | --- | --- |\n| `/x a\\|b` | one two three | a \\| b |\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := HelpMarkdown(tc.cmds); got != tc.want {
				t.Errorf("HelpMarkdown\n got: %q\nwant: %q", got, tc.want)
			}
		})
	}
}

func TestReadmeTable(t *testing.T) {
	t.Parallel()
	got := ReadmeTable()
	if got != HelpMarkdown(Registry()) {
		t.Fatal("ReadmeTable differs from HelpMarkdown(Registry())")
	}
	// Header, separator and one row per command.
	if n := strings.Count(got, "\n"); n != 2+len(Registry()) {
		t.Fatalf("ReadmeTable has %d lines, want %d:\n%s", n, 2+len(Registry()), got)
	}
	for _, c := range Registry() {
		if !strings.Contains(got, "| `"+c.Usage+"` |") {
			t.Errorf("ReadmeTable lacks a row for %s:\n%s", c.Usage, got)
		}
	}
}

// TestRegistryEveryCommandHasItsHandler: each registry entry carries the
// handler that runs it (STYLE rule 21, issue 9); nothing maps names to
// handlers elsewhere.
func TestRegistryEveryCommandHasItsHandler(t *testing.T) {
	t.Parallel()
	for _, c := range Registry() {
		if c.Run == nil {
			t.Errorf("command %q has no handler", c.Name)
		}
	}
}

// TestRegistryOnGitHub (issue 15): on GitHub no command's description or
// who-text names GitLab's things; on GitLab (and with no platform named)
// the registry is Registry word for word, the README's command table.
func TestRegistryOnGitHub(t *testing.T) {
	t.Parallel()
	lab := Registry()
	for _, p := range []string{"", "gitlab"} {
		if got := RegistryOn(p); !reflect.DeepEqual(helpOf(got), helpOf(lab)) {
			t.Errorf("RegistryOn(%q) differs from Registry", p)
		}
	}
	hub := RegistryOn("github")
	if len(hub) != len(lab) {
		t.Fatalf("%d commands on GitHub, %d on GitLab", len(hub), len(lab))
	}
	for i, c := range hub {
		if c.Name != lab[i].Name {
			t.Fatalf("command %d is %s on GitHub, %s on GitLab", i, c.Name, lab[i].Name)
		}
		for _, text := range []string{c.Description, c.WhoText} {
			for _, never := range []string{"GitLab", "merge request", "MR ", "pipeline", "Developer"} {
				if strings.Contains(text, never) {
					t.Errorf("/%s on GitHub says %q: %s", c.Name, never, text)
				}
			}
		}
	}
}
