// Package jsonbody checks JSON request bodies and explains why one does
// not decode in the sender's terms: JSON field paths with array indexes
// ("files[0].path") and JSON types ("a string"), never Go's type or struct
// names, which encoding/json's errors carry ("Go struct field
// F.files.path of type string").
//
// The REST API and the approval and deploy callbacks decode their bodies
// with DecodeStrict: one JSON value, nothing after it, no key twice in an
// object (CheckDuplicates: encoding/json keeps the last silently, so a
// body could say two things); every JSON intake (webhooks too) words its
// decoding errors with Describe.
package jsonbody

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// MaxDepth bounds the nesting CheckDuplicates walks: a body nested deeper
// is refused with *TooDeepError. The bot's bodies nest four levels at
// most; a callback's free-form "ext" may nest more.
const MaxDepth = 64

// maxPathLen bounds a path shown in an error; a longer one is cut with
// "…".
const maxPathLen = 200

// DuplicateKeyError is a JSON object with a key twice. Path is the second
// occurrence's JSON path ("subject_id", "files[1].path").
type DuplicateKeyError struct{ Path string }

// Error implements error.
func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("duplicate key %s: every key may appear once", e.Path)
}

// TooDeepError is a body nested deeper than MaxDepth.
type TooDeepError struct{ Path string }

// Error implements error.
func (e *TooDeepError) Error() string {
	return fmt.Sprintf("the body nests deeper than %d levels at %s", MaxDepth, e.Path)
}

// CheckDuplicates walks body, one JSON value, token by token (once, in
// time and memory linear in its size) and returns a *DuplicateKeyError for
// the first object key that appears twice in its object, or a
// *TooDeepError. A body that is not valid JSON returns nil: decoding it
// reports that (Describe). Keys are compared as decoded, so "a" and
// "\u0061" are the same key.
func CheckDuplicates(body []byte) error {
	err := walk(body, nil)
	var dup *DuplicateKeyError
	var deep *TooDeepError
	if errors.As(err, &dup) || errors.As(err, &deep) {
		return err
	}
	return nil
}

// frame is one open object or array of walk.
type frame struct {
	object bool
	path   string
	// keys are the keys seen so far (objects).
	keys map[string]bool
	// key is the key whose value comes next (objects), index the next
	// element's (arrays).
	key   string
	index int
	// wantKey is true when the next token of an object is a key.
	wantKey bool
	// segs are the object keys on the way to this frame.
	segs []string
}

// visitor receives each value of walk in document order: its path, the
// object keys on the way (without indexes), and its JSON kind (object,
// array, string, number, true or false as "boolean", null). It returns
// false to stop.
type visitor func(path string, segs []string, kind string) bool

// walk visits every value of body; it returns the first duplicate key or
// depth error, the token error of invalid JSON, or nil.
func walk(body []byte, visit visitor) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.object && top.wantKey {
			key, _ := tok.(string)
			if top.keys[key] {
				return &DuplicateKeyError{Path: cut(join(top.path, key))}
			}
			top.keys[key] = true
			top.key, top.wantKey = key, false
			continue
		}
		path, segs := "", []string(nil)
		switch {
		case top == nil:
		case top.object:
			path = join(top.path, top.key)
			if visit != nil { // only locate reads the keys on the way
				segs = append(append(make([]string, 0, len(top.segs)+1), top.segs...), top.key)
			}
			top.wantKey = true
		default:
			path, segs = top.path+"["+strconv.Itoa(top.index)+"]", top.segs
			top.index++
		}
		kind := kindOf(tok)
		if visit != nil && !visit(path, segs, kind) {
			return nil
		}
		if d, ok := tok.(json.Delim); ok {
			if len(stack) >= MaxDepth {
				return &TooDeepError{Path: cut(cmp.Or(path, "the top"))}
			}
			f := &frame{object: d == '{', path: path, segs: segs, wantKey: d == '{'}
			if f.object {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
		}
	}
}

// kindOf names a token's JSON kind.
func kindOf(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "object"
		}
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// join appends key to path: ".key", or ["key"] (quoted) when key is not
// a plain name (letters, digits, '_', '-').
func join(path, key string) string {
	plain := key != "" && strings.IndexFunc(key, notNameRune) < 0
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// notNameRune reports a rune other than a letter, a digit, '_' or '-' of
// ASCII.
func notNameRune(r rune) bool {
	return r != '_' && r != '-' && (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z')
}

func cut(path string) string {
	if len(path) <= maxPathLen {
		return path
	}
	return strings.ToValidUTF8(path[:maxPathLen], "") + "…"
}

// ErrTrailingData is DecodeStrict's error for a body with anything but
// whitespace after its JSON value: another value, a stray "}" or "]".
var ErrTrailingData = errors.New("data after the JSON value")

// DecodeStrict decodes body, one JSON value, into v, as the REST API and
// the callbacks read a request body. It returns an error when body does
// not decode into v (worded by Describe: JSON paths and JSON types, never
// Go's names; with disallowUnknown, a field v does not have is one), when
// anything but whitespace follows the value (ErrTrailingData: json.Decoder's
// More is false before a stray "}" or "]", so the next token must be
// io.EOF), or when an object has a key twice (*DuplicateKeyError, or
// *TooDeepError, from CheckDuplicates). The checks run in that order; the
// first failing one is returned. Error texts never contain a value of the
// body.
func DecodeStrict(body []byte, v any, disallowUnknown bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if disallowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return errors.New(Describe(err, body))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	if err := CheckDuplicates(body); err != nil {
		return err
	}
	if disallowUnknown {
		return checkKeyCase(body, reflect.TypeOf(v))
	}
	return nil
}

// KeyCaseError is an object key that names a field only in another case
// ("Subject_ID" for subject_id): encoding/json matches keys to fields
// without regard to case, so such a key would fill the field, or replace
// the one written right. Path is its JSON path, Want the field's name.
type KeyCaseError struct{ Path, Want string }

// Error implements error.
func (e *KeyCaseError) Error() string {
	return fmt.Sprintf("unknown field %q: field names are case-sensitive (did you mean %q?)", cut(e.Path), e.Want)
}

// checkKeyCase walks body (which decoded into a value of type t) beside t
// and returns a *KeyCaseError for the first object key that is not a field
// name of its struct as written but matches one in another case. Maps take
// any key; an interface or json.RawMessage takes anything.
func checkKeyCase(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return keyCase(dec, t, "")
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

func keyCase(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return nil // decoded before: nothing to say
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch {
	case d == '{' && t != nil && t.Kind() == reflect.Struct && t != rawMessage:
		names := fieldNames(t)
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil
			}
			key, _ := k.(string)
			ft, exact := names[key]
			if !exact {
				for name := range names {
					if strings.EqualFold(name, key) {
						return &KeyCaseError{Path: join(path, key), Want: name}
					}
				}
			}
			if err := keyCase(dec, ft, join(path, key)); err != nil {
				return err
			}
		}
	case d == '{':
		var vt reflect.Type
		if t != nil && t.Kind() == reflect.Map {
			vt = t.Elem()
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil
			}
			key, _ := k.(string)
			if err := keyCase(dec, vt, join(path, key)); err != nil {
				return err
			}
		}
	case d == '[':
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t != rawMessage {
			et = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := keyCase(dec, et, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return nil
}

// fieldNames are the JSON names of struct type t's fields as encoding/json
// reads them (the tag's name, else the Go name; embedded structs' fields
// promoted; "-" and unexported fields left out), with their types.
func fieldNames(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && !strings.HasPrefix(tag, "-,") {
			continue
		}
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for n, typ := range fieldNames(et) {
					if _, ok := out[n]; !ok {
						out[n] = typ
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

// Describe says why decoding body failed with err, in one sentence
// without Go's names: a value of the wrong type as "field files[0].path
// must be a string, not a number" (the path with indexes, found in body)
// or "the body must be a JSON object, not a string"; a syntax error with
// its byte offset; "unknown field "x"" (DisallowUnknownFields); a body
// that ends early. Other errors (a custom UnmarshalJSON's) keep their
// text, without encoding/json's "json: " prefix. body may be nil: paths
// then lack their indexes.
func Describe(err error, body []byte) string {
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &ute):
		want := typeName(ute.Type)
		got := article(ute.Value)
		if ute.Field == "" {
			return fmt.Sprintf("the body must be %s, not %s", want, got)
		}
		return fmt.Sprintf("field %s must be %s, not %s", cut(locate(body, ute.Field, ute.Value)), want, got)
	case errors.As(err, &se) && se.Error() == "unexpected end of JSON input": // json.Unmarshal's
		return "malformed JSON: the body ends early"
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends early"
	case errors.Is(err, io.EOF):
		return "the body is empty"
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + rest
	}
	return strings.TrimPrefix(msg, "json: ")
}

// Readable returns err worded by Describe when it is encoding/json's (a
// wrong type, a syntax error, a body ending early), else err as it is: the
// webhook decoders wrap what it returns.
func Readable(err error, body []byte) error {
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	if errors.As(err, &ute) || errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New(Describe(err, body))
	}
	return err
}

// locate returns the JSON path with indexes of the first value in body
// whose object keys are field's ("files.path": encoding/json's path,
// without indexes or map keys) and whose kind is got: the value that did
// not decode. field itself when body does not have one.
func locate(body []byte, field, got string) string {
	if len(body) == 0 {
		return field
	}
	want := strings.Split(field, ".")
	found := ""
	_ = walk(body, func(path string, segs []string, kind string) bool {
		if kind == kindWord(got) && endsLike(segs, want) {
			found = path
			return false
		}
		return true
	})
	return cmp.Or(found, field)
}

// kindWord maps encoding/json's UnmarshalTypeError.Value ("number 7" in
// old versions, "number", "string", "bool", "array", "object") onto
// kindOf's words.
func kindWord(v string) string {
	v, _, _ = strings.Cut(v, " ")
	if v == "bool" {
		return "boolean"
	}
	return v
}

// endsLike reports whether want (encoding/json's field path) is a
// subsequence of segs (the object keys on the way: map keys included)
// with the same last key.
func endsLike(segs, want []string) bool {
	if len(segs) == 0 || len(want) == 0 || segs[len(segs)-1] != want[len(want)-1] {
		return false
	}
	i := 0
	for _, s := range segs {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}

// article puts "a" or "an" before a JSON kind ("an object", "a number").
func article(kind string) string {
	switch k := kindWord(kind); k {
	case "object", "array":
		return "an " + k
	case "boolean":
		return "true or false"
	case "null":
		return "null"
	default:
		return "a " + k
	}
}

// typeName names the JSON type a Go type decodes from.
func typeName(t reflect.Type) string {
	if t == nil {
		return "of another JSON type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "of another JSON type"
}
