package bot

import (
	"os"
	"regexp"
	"testing"

	"changebot/repoconfig"
)

// TestChangebotYmlDocsExample keeps the example of docs/changebot-yml.md
// (its first yaml block) a valid file whose path rules give the binding
// its comment names, and the placeholders' worked example true.
func TestChangebotYmlDocsExample(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/changebot-yml.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/changebot-yml.md has no yaml example")
	}
	p, err := repoconfig.Parse(m[1])
	if err != nil {
		t.Fatalf("the docs' example: %v", err)
	}
	for _, tc := range []struct{ path, subject, target string }{
		{"envs/prod/apps/web/values.yaml", "app/web", "prod"},
		{"envs/prod/apps/web/k8s/deploy.yaml", "app/web", "prod"},
		{"envs/stage/shared.yaml", "shared", "stage"},
	} {
		if s, tg, err := p.Binding([]string{tc.path}); err != nil || s != tc.subject || tg != tc.target {
			t.Errorf("Binding(%s) = %q, %q, %v; want %q, %q", tc.path, s, tg, err, tc.subject, tc.target)
		}
	}
	g, err := repoconfig.CompileGlob("envs/*/apps/*/**")
	if err != nil {
		t.Fatal(err)
	}
	if caps, ok := g.Match("envs/prod/apps/web/k8s/deploy.yaml"); !ok || len(caps) != 3 || caps[0] != "prod" || caps[1] != "web" || caps[2] != "k8s/deploy.yaml" {
		t.Errorf("the placeholders' worked example: captures %q, %v", caps, ok)
	}
}
