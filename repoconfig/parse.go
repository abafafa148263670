package repoconfig

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed schema.json
var schemaJSON []byte

// Schema returns the JSON Schema (draft 2020-12) of `.changebot.yml`, the
// embedded file every Parse validates against (a copy: callers may keep it).
func Schema() []byte { return bytes.Clone(schemaJSON) }

// compiled is the schema compiled once; the schema is part of the binary,
// so a compile error is a programming error caught by every test.
var compiled = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		panic(fmt.Sprintf("repoconfig: reading the embedded schema: %v", err))
	}
	c := jsonschema.NewCompiler()
	const url = "urn:changebot:schema:changebot.yml"
	if err := c.AddResource(url, doc); err != nil {
		panic(fmt.Sprintf("repoconfig: adding the embedded schema: %v", err))
	}
	s, err := c.Compile(url)
	if err != nil {
		panic(fmt.Sprintf("repoconfig: compiling the embedded schema: %v", err))
	}
	return s
}()

// Problem is one thing wrong with a `.changebot.yml`.
type Problem struct {
	// Key is the dotted path of the key the problem is about, with list
	// indexes counted from 0 (`queue.mode`, `paths[2].match`); "" for the
	// file as a whole.
	Key string `json:"key"`
	// Line is the 1-based line of that key in the file (of the list item
	// for an item, of the enclosing section for a missing key); 0 for the
	// file as a whole (too large, empty).
	Line int `json:"line"`
	// Message says what is wrong in words for the file's authors, e.g.
	// "must be one of auto, on, off (not always)".
	Message string `json:"message"`
}

// String renders the problem as one line: "line 7 `queue.mode`: must be …",
// without the parts that are empty.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d", p.Line)
	}
	if p.Key != "" {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "`%s`", p.Key)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return strings.TrimSpace(b.String())
}

// InvalidError is Parse's error for a file that is not a valid
// `.changebot.yml`: every problem found, sorted by line then key.
type InvalidError struct {
	// Problems holds at least one problem.
	Problems []Problem
}

// Error joins the problems: "invalid .changebot.yml: line 3 `version`: …; …".
func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid " + FileName + ": " + strings.Join(parts, "; ")
}

// Parse reads a `.changebot.yml`: YAML, then the embedded schema, then
// the rules a schema cannot say (globs and their placeholders). A file
// that is not valid gives a *InvalidError naming every problem with its
// key and line; one larger than MaxFileSize is refused unread.
func Parse(data []byte) (Policy, error) {
	if len(data) > MaxFileSize {
		return Policy{}, invalid(Problem{Message: fmt.Sprintf("the file is %d bytes; at most %d (64 KiB) are read", len(data), MaxFileSize)})
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return Policy{}, invalid(syntaxProblem(err))
	}
	var docs []*ast.DocumentNode
	for _, d := range file.Docs {
		if d != nil && d.Body != nil {
			if _, comment := d.Body.(*ast.CommentGroupNode); !comment {
				docs = append(docs, d)
			}
		}
	}
	switch {
	case len(docs) == 0:
		return Policy{}, invalid(Problem{Message: "the file is empty; it needs at least `version: 1`"})
	case len(docs) > 1:
		return Policy{}, invalid(Problem{Line: line(docs[1].Body), Message: "the file holds more than one YAML document (a second `---`); it must hold one"})
	}
	c := converter{lines: map[string]int{"": 1}}
	value := c.value(docs[0].Body, "")
	if len(c.problems) > 0 {
		return Policy{}, invalid(c.problems...)
	}
	problems := c.ruleProblems(value)
	if err := compiled.Validate(value); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return Policy{}, fmt.Errorf("validating %s: %w", FileName, err)
		}
		problems = append(problems, c.schemaProblems(ve, value)...)
	}
	if len(problems) > 0 {
		return Policy{}, invalid(problems...)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return Policy{}, fmt.Errorf("encoding %s for decoding: %w", FileName, err)
	}
	var p Policy
	if err := json.Unmarshal(raw, &p); err != nil {
		return Policy{}, fmt.Errorf("decoding %s: %w", FileName, err)
	}
	return p, nil
}

// invalid sorts and deduplicates problems into an *InvalidError.
func invalid(problems ...Problem) *InvalidError {
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Key, b.Key)
	})
	return &InvalidError{Problems: slices.Compact(problems)}
}

// syntaxProblem turns the YAML parser's error into a problem at its line.
func syntaxProblem(err error) Problem {
	var ye yaml.Error
	if errors.As(err, &ye) {
		p := Problem{Message: "the file is not valid YAML: " + ye.GetMessage()}
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			p.Line = tk.Position.Line
		}
		return p
	}
	return Problem{Message: "the file is not valid YAML: " + err.Error()}
}

// line is the 1-based line a node starts on, 0 when unknown.
func line(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// converter turns the YAML tree into the JSON values the schema checks,
// recording the line of every key path and the constructs the file may
// not use.
type converter struct {
	lines    map[string]int
	problems []Problem
}

// value converts n, found at key path key.
func (c *converter) value(n ast.Node, key string) any {
	switch n := n.(type) {
	case *ast.MappingNode:
		out := map[string]any{}
		for _, mv := range n.Values {
			c.pair(out, mv, key)
		}
		return out
	case *ast.MappingValueNode:
		out := map[string]any{}
		c.pair(out, n, key)
		return out
	case *ast.SequenceNode:
		out := make([]any, 0, len(n.Values))
		for i, v := range n.Values {
			k := key + "[" + strconv.Itoa(i) + "]"
			c.lines[k] = line(v)
			out = append(out, c.value(v, k))
		}
		return out
	case *ast.StringNode:
		return n.Value
	case *ast.LiteralNode:
		return n.Value.Value
	case *ast.IntegerNode:
		return n.Value
	case *ast.FloatNode:
		return n.Value
	case *ast.BoolNode:
		return n.Value
	case *ast.NullNode:
		return nil
	case *ast.TagNode:
		return c.value(n.Value, key)
	case *ast.AnchorNode, *ast.AliasNode:
		c.problems = append(c.problems, Problem{Key: key, Line: line(n), Message: "uses a YAML anchor or alias (& or *); write the value out"})
		return nil
	case *ast.InfinityNode, *ast.NanNode:
		c.problems = append(c.problems, Problem{Key: key, Line: line(n), Message: "is not a finite number"})
		return nil
	}
	c.problems = append(c.problems, Problem{Key: key, Line: line(n), Message: "holds a YAML construct this file does not use"})
	return nil
}

// pair adds one key: value of a mapping to out.
func (c *converter) pair(out map[string]any, mv *ast.MappingValueNode, parent string) {
	var name string
	switch k := mv.Key.(type) {
	case *ast.StringNode:
		name = k.Value
	case *ast.MergeKeyNode:
		c.problems = append(c.problems, Problem{Key: parent, Line: line(k), Message: "uses a YAML merge key (<<); write the keys out"})
		return
	default:
		name = k.GetToken().Value
	}
	key := join(parent, name)
	if _, dup := out[name]; dup {
		c.problems = append(c.problems, Problem{Key: key, Line: line(mv.Key), Message: "appears twice"})
		return
	}
	c.lines[key] = line(mv.Key)
	out[name] = c.value(mv.Value, key)
}

// join appends a key name to a key path.
func join(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// schemaProblems turns the schema's verdict into problems, one per failed
// leaf check, each at the key it names.
func (c *converter) schemaProblems(ve *jsonschema.ValidationError, value any) []Problem {
	var out []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, cause := range e.Causes {
				walk(cause)
			}
			return
		}
		key := keyOf(e.InstanceLocation, value)
		out = append(out, c.kindProblems(key, e)...)
	}
	walk(ve)
	return out
}

// keyOf renders an instance location as a key path, indexes in brackets.
func keyOf(loc []string, value any) string {
	var key string
	for _, tok := range loc {
		switch v := value.(type) {
		case []any:
			i, _ := strconv.Atoi(tok)
			key += "[" + tok + "]"
			if i >= 0 && i < len(v) {
				value = v[i]
			}
		case map[string]any:
			key = join(key, tok)
			value = v[tok]
		default:
			key = join(key, tok)
		}
	}
	return key
}

var printer = message.NewPrinter(language.English)

// kindProblems words one failed check at key.
func (c *converter) kindProblems(key string, e *jsonschema.ValidationError) []Problem {
	at := func(k, msg string) Problem { return Problem{Key: k, Line: c.lines[k], Message: msg} }
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		var out []Problem
		known := strings.Join(keysAt(e.InstanceLocation), ", ")
		for _, name := range k.Properties {
			out = append(out, at(join(key, name), "is not a key here; the keys here are "+known))
		}
		return out
	case *kind.Required:
		var out []Problem
		for _, name := range k.Missing {
			p := at(join(key, name), "is required and missing")
			p.Line = c.lines[key]
			out = append(out, p)
		}
		return out
	case *kind.Type:
		return []Problem{at(key, "must be "+typeWords(k.Want)+", not "+typeWord(k.Got))}
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		return []Problem{at(key, fmt.Sprintf("must be one of %s (not %s)", strings.Join(want, ", "), shown(k.Got)))}
	case *kind.Const:
		return []Problem{at(key, fmt.Sprintf("must be %v (not %s)", k.Want, shown(k.Got)))}
	case *kind.Minimum:
		return []Problem{at(key, "must be at least "+ratString(k.Want))}
	case *kind.MinLength:
		return []Problem{at(key, "must not be empty")}
	case *kind.MinItems:
		return []Problem{at(key, fmt.Sprintf("must list at least %d item(s)", k.Want))}
	case *kind.UniqueItems:
		return []Problem{at(key, fmt.Sprintf("lists the same value twice (items %d and %d)", k.Duplicates[0], k.Duplicates[1]))}
	}
	return []Problem{at(key, e.ErrorKind.LocalizedString(printer))}
}

// keysAt lists the keys the schema allows at an instance location.
func keysAt(loc []string) []string {
	s := schemaNode(loc)
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// schemaNode returns the schema object that governs an instance location.
func schemaNode(loc []string) map[string]any {
	var root map[string]any
	if err := json.Unmarshal(schemaJSON, &root); err != nil {
		return nil
	}
	s := root
	for _, tok := range loc {
		if props, ok := s["properties"].(map[string]any); ok {
			if next, ok := props[tok].(map[string]any); ok {
				s = next
				continue
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			s = items
			continue
		}
		return nil
	}
	return s
}

// typeWords names the JSON types a check wanted, for people.
func typeWords(types []string) string {
	words := make([]string, len(types))
	for i, t := range types {
		words[i] = typeWord(t)
	}
	return strings.Join(words, " or ")
}

// typeWord names one JSON type as YAML's authors know it.
func typeWord(t string) string {
	switch t {
	case "object":
		return "a mapping of keys"
	case "array":
		return "a list"
	case "string":
		return "text"
	case "integer":
		return "a whole number"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "null":
		return "empty"
	}
	return t
}

// shown renders a value the file gave, briefly.
func shown(v any) string {
	switch v := v.(type) {
	case nil:
		return "empty"
	case string:
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return strconv.Quote(v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// ratString renders a schema bound (whole numbers in this schema).
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(2)
}

// ruleProblems checks what the schema cannot: each path rule's glob and
// the placeholders its subject and target use. It reads the rules that
// have the right shape, so its problems come with the schema's.
func (c *converter) ruleProblems(value any) []Problem {
	root, _ := value.(map[string]any)
	rules, _ := root["paths"].([]any)
	var out []Problem
	at := func(k string, err error) Problem { return Problem{Key: k, Line: c.lines[k], Message: err.Error()} }
	for i, item := range rules {
		rule, _ := item.(map[string]any)
		base := "paths[" + strconv.Itoa(i) + "]"
		match, ok := rule["match"].(string)
		if !ok || match == "" {
			continue // the schema's problem
		}
		g, err := CompileGlob(match)
		if err != nil {
			out = append(out, at(base+".match", err))
			continue
		}
		for _, name := range []string{"subject", "target"} {
			text, _ := rule[name].(string)
			if err := checkPlaceholders(text, g.Wildcards()); err != nil {
				out = append(out, at(base+"."+name, err))
			}
		}
	}
	return out
}
