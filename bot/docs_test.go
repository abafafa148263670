package bot

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the generated sections of README.md")

// TestReadmeGeneratedSections keeps README.md's command, configuration,
// settings and step tables equal to the code they are generated from
// (go test ./bot -run Readme -update-readme rewrites them).
func TestReadmeGeneratedSections(t *testing.T) {
	const path = "../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for name, want := range ReadmeSections() {
		re := regexp.MustCompile(`(?s)(<!-- BEGIN ` + name + ` -->\n)(.*?)(<!-- END ` + name + ` -->)`)
		m := re.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("README.md has no %q section markers", name)
			continue
		}
		if strings.TrimSpace(m[2]) == strings.TrimSpace(want) {
			continue
		}
		if *updateReadme {
			text = re.ReplaceAllLiteralString(text, m[1]+strings.TrimSpace(want)+"\n"+m[3])
			continue
		}
		t.Errorf("README.md section %q is stale; run go test ./bot -run Readme -update-readme", name)
	}
	if *updateReadme {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
