package repoconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// KeysTable renders the reference of every key of `.changebot.yml` as a
// markdown table (key, type, default, description), generated from the
// embedded schema in the schema's order: list items' keys are written
// `paths[].match`. docs/changebot-yml.md holds it between its
// `<!-- BEGIN keys -->` markers, and a test keeps the two equal.
func KeysTable() string {
	var b strings.Builder
	b.WriteString("| key | type | default | description |\n| --- | --- | --- | --- |\n")
	writeKeys(&b, "", schemaJSON)
	return b.String()
}

// schemaObject is the part of a schema node the table reads.
type schemaObject struct {
	Type        string          `json:"type"`
	Description string          `json:"description"`
	Default     json.RawMessage `json:"default"`
	Const       json.RawMessage `json:"const"`
	Enum        []any           `json:"enum"`
	Minimum     *int            `json:"minimum"`
	MinLength   int             `json:"minLength"`
	Required    []string        `json:"required"`
	Properties  json.RawMessage `json:"properties"`
	Items       json.RawMessage `json:"items"`
}

// writeKeys writes the rows of the properties of the object schema raw,
// whose key path is prefix.
func writeKeys(b *strings.Builder, prefix string, raw json.RawMessage) {
	var obj schemaObject
	if err := json.Unmarshal(raw, &obj); err != nil || len(obj.Properties) == 0 {
		return
	}
	props := map[string]json.RawMessage{}
	if err := json.Unmarshal(obj.Properties, &props); err != nil {
		return
	}
	for _, name := range orderedKeys(obj.Properties) {
		key := join(prefix, name)
		var p schemaObject
		if err := json.Unmarshal(props[name], &p); err != nil {
			continue
		}
		def := ""
		switch {
		case len(p.Default) > 0:
			def = "`" + string(p.Default) + "`"
		case slices.Contains(obj.Required, name):
			def = "required"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", key, typeOf(p), def, p.Description)
		switch p.Type {
		case "object":
			writeKeys(b, key, props[name])
		case "array":
			writeKeys(b, key+"[]", p.Items)
		}
	}
}

// typeOf words a property's type and bounds for the table.
func typeOf(p schemaObject) string {
	switch {
	case len(p.Const) > 0:
		return "`" + string(p.Const) + "`"
	case len(p.Enum) > 0:
		return "one of " + enumWords(p.Enum)
	}
	switch p.Type {
	case "array":
		var items schemaObject
		if err := json.Unmarshal(p.Items, &items); err == nil {
			switch {
			case len(items.Enum) > 0:
				return "list of " + enumWords(items.Enum)
			case items.Type == "object":
				return "list of mappings"
			}
			return "list of " + typeOf(items)
		}
		return "list"
	case "object":
		return "mapping"
	case "integer":
		if p.Minimum != nil {
			return fmt.Sprintf("integer ≥ %d", *p.Minimum)
		}
		return "integer"
	case "string":
		if p.MinLength > 0 {
			return "text (not empty)"
		}
		return "text"
	}
	return p.Type
}

// enumWords renders enum values as `a`, `b`, `c`.
func enumWords(values []any) string {
	words := make([]string, len(values))
	for i, v := range values {
		words[i] = fmt.Sprintf("`%v`", v)
	}
	return strings.Join(words, ", ")
}

// orderedKeys lists the keys of the JSON object raw in the file's order.
func orderedKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}
