package bot

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the generated sections of the README's reference files in docs/")

// readmeSectionFiles names the file, from this package's directory, that
// holds each generated section of ReadmeSections: the README links them.
var readmeSectionFiles = map[string]string{
	"commands": "../docs/commands.md",
	"config":   "../docs/configuration.md",
	"settings": "../docs/configuration.md",
	"steps":    "../docs/states.md",
	"keys":     "../docs/changebot-yml.md",
}

// TestReadmeGeneratedSections keeps the command, configuration, settings
// and step tables, which the README links in docs/, equal to the code they
// are generated from (go test ./bot -run Readme -update-readme rewrites
// them), and each in the file readmeSectionFiles names.
func TestReadmeGeneratedSections(t *testing.T) {
	texts := map[string]string{}
	for name, want := range ReadmeSections() {
		path, ok := readmeSectionFiles[name]
		if !ok {
			t.Errorf("generated section %q has no file in readmeSectionFiles", name)
			continue
		}
		text, ok := texts[path]
		if !ok {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text = string(raw)
		}
		re := regexp.MustCompile(`(?s)(<!-- BEGIN ` + name + ` -->\n)(.*?)(<!-- END ` + name + ` -->)`)
		m := re.FindStringSubmatch(text)
		switch {
		case m == nil:
			t.Errorf("%s has no %q section markers", path, name)
		case strings.TrimSpace(m[2]) == strings.TrimSpace(want):
		case *updateReadme:
			text = re.ReplaceAllLiteralString(text, m[1]+strings.TrimSpace(want)+"\n"+m[3])
		default:
			t.Errorf("%s section %q is stale; run go test ./bot -run Readme -update-readme", path, name)
		}
		texts[path] = text
	}
	// A section moved elsewhere must not stay behind, stale, in the README.
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range ReadmeSections() {
		if strings.Contains(string(raw), "<!-- BEGIN "+name+" -->") {
			t.Errorf("README.md still holds the generated section %q, which lives in %s", name, readmeSectionFiles[name])
		}
	}
	if *updateReadme {
		for path, text := range texts {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestDesignLayoutNamesEveryPackage keeps the package table of
// docs/design.md (§8 Layout) equal to the module's packages: a new package
// must be described there, and a removed one must leave the table.
func TestDesignLayoutNamesEveryPackage(t *testing.T) {
	raw, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatalf("reading docs/design.md: %v", err)
	}
	m := regexp.MustCompile(`(?s)<!-- BEGIN packages -->(.*?)<!-- END packages -->`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/design.md has no packages table markers")
	}
	documented := map[string]bool{}
	for _, row := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllSubmatch(m[1], -1) {
		documented[string(row[1])] = true
	}

	packages := map[string]bool{}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "deploy") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, err := filepath.Rel("..", filepath.Dir(path))
			if err != nil {
				return err
			}
			packages[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
	for p := range packages {
		if !documented[p] {
			t.Errorf("package %s is missing from docs/design.md §8 Layout", p)
		}
	}
	for p := range documented {
		if !packages[p] {
			t.Errorf("docs/design.md §8 Layout names %s, which is not a package of the module", p)
		}
	}
}
