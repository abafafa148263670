package jsonbody

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestCheckDuplicates: a key twice in one object is refused naming its
// path with indexes; the same key in sibling objects, escaped spellings
// of other keys and invalid JSON are not its business.
func TestCheckDuplicates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       string // the error; "" for none
	}{
		{"none", `{"subject_id":"g4","files":[{"path":"a"},{"path":"b"}]}`, ""},
		{"top level", `{"subject_id":"g4","subject_id":"g5"}`, "duplicate key subject_id: every key may appear once"},
		{"in an array element", `{"files":[{"path":"a"},{"path":"b","content":"x","path":"c"}]}`, "duplicate key files[1].path: every key may appear once"},
		{"escaped spelling of the same key", `{"a":1,"\u0061":2}`, "duplicate key a: every key may appear once"},
		{"odd key quoted", `{"ext":{"a.b":1,"a.b":2}}`, `duplicate key ext["a.b"]: every key may appear once`},
		{"same key in nested objects", `{"a":{"a":{"a":1}}}`, ""},
		{"invalid JSON is left to the decoder", `{"a":1,"b"`, ""},
		{"scalar body", `"30m"`, ""},
		{"too deep", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), "the body nests deeper than 64 levels at "},
		{"as deep as allowed", strings.Repeat(`[`, MaxDepth) + strings.Repeat("]", MaxDepth), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckDuplicates([]byte(tt.body))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckDuplicates = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("CheckDuplicates = %v, want %q", err, tt.want)
			}
		})
	}
	var dup *DuplicateKeyError
	if err := CheckDuplicates([]byte(`{"x":[{"k":1,"k":2}]}`)); !errors.As(err, &dup) || dup.Path != "x[0].k" {
		t.Errorf("CheckDuplicates = %#v, want a *DuplicateKeyError at x[0].k", err)
	}
}

type file struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type text struct{ s string }

func (t *text) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &t.s) }

type request struct {
	Title text            `json:"title"`
	Files []file          `json:"files"`
	IID   int64           `json:"iid"`
	Meta  map[string]file `json:"meta"`
	Draft bool            `json:"draft"`
}

// TestDescribe: encoding/json's errors become sentences with JSON paths
// (indexes included) and JSON types, without Go's names.
func TestDescribe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       string
	}{
		{"nested wrong type names its index", `{"files":[{"path":"a"},{"path":7}]}`, "field files[1].path must be a string, not a number"},
		{"through a custom unmarshaler", `{"title":"t","files":[{"path":"a","content":{}}]}`, "field files[0].content must be a string, not an object"},
		{"custom unmarshaler at the top", `{"title":5}`, "field title must be a string, not a number"},
		{"element of the wrong type", `{"files":[{"path":"a"},1]}`, "field files[1] must be an object, not a number"},
		{"array of the wrong type", `{"files":"a.yaml"}`, "field files must be an array, not a string"},
		{"integer as a string", `{"iid":"abc"}`, "field iid must be an integer, not a string"},
		{"fraction for an integer", `{"iid":1.5}`, "field iid must be an integer, not a number"},
		{"boolean", `{"draft":"yes"}`, "field draft must be true or false, not a string"},
		{"through a map key", `{"meta":{"k":{"path":[]}}}`, "field meta.k.path must be a string, not an array"},
		{"not an object", `"30m"`, "the body must be an object, not a string"},
		{"syntax", `{"iid":}`, "malformed JSON at byte 8: invalid character '}' looking for beginning of value"},
		{"ends early", `{"iid":1`, "malformed JSON: the body ends early"},
		{"ends early, as json.Unmarshal says it", "unmarshal:" + `{"iid":1`, "malformed JSON: the body ends early"},
		{"empty", ``, "the body is empty"},
		{"unknown field", `{"iid":1,"zz":2}`, `unknown field "zz"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r request
			var err error
			body, unmarshal := strings.CutPrefix(tt.body, "unmarshal:")
			if unmarshal {
				err = json.Unmarshal([]byte(body), &r)
			} else {
				dec := json.NewDecoder(strings.NewReader(body))
				dec.DisallowUnknownFields()
				err = dec.Decode(&r)
			}
			if err == nil {
				t.Fatal("decoded")
			}
			got := Describe(err, []byte(body))
			if got != tt.want {
				t.Errorf("Describe = %q, want %q (from %v)", got, tt.want, err)
			}
			for _, leak := range []string{"Go ", "request", "jsonbody", "int64", "json:"} {
				if strings.Contains(got, leak) {
					t.Errorf("Describe = %q shows %q", got, leak)
				}
			}
		})
	}
}

// TestDecodeStrict: one JSON value and nothing after it but whitespace
// (a stray "}" or "]", which json.Decoder.More does not see, included);
// unknown fields refused on request; a key twice refused; errors worded by
// Describe.
func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type body struct {
		A int `json:"a"`
	}
	tests := []struct {
		name, body      string
		disallowUnknown bool
		want            string // the error; "" for none
	}{
		{"one object", `{"a":1}`, true, ""},
		{"whitespace after", "{\"a\":1} \t\r\n", true, ""},
		{"whitespace before", " \n{\"a\":1}", true, ""},
		{"a stray brace after", `{"a":1} }`, true, "data after the JSON value"},
		{"a stray bracket after", `{"a":1}]`, true, "data after the JSON value"},
		{"a second object", `{"a":1}{}`, true, "data after the JSON value"},
		{"a word after", `{"a":1} x`, true, "data after the JSON value"},
		{"a number after", `{"a":1} 2`, true, "data after the JSON value"},
		{"unknown field refused", `{"a":1,"b":2}`, true, `unknown field "b"`},
		{"unknown field allowed", `{"a":1,"b":2}`, false, ""},
		{"duplicate key", `{"a":1,"a":2}`, true, "duplicate key a: every key may appear once"},
		{"duplicate key in an unknown field", `{"a":1,"x":{"k":1,"k":2}}`, false, "duplicate key x.k: every key may appear once"},
		{"wrong type", `{"a":"1"}`, true, "field a must be an integer, not a string"},
		{"empty", ``, true, "the body is empty"},
		{"ends early", `{"a":1`, true, "malformed JSON: the body ends early"},
		{"a key in another case refused", `{"A":1}`, true, `unknown field "A": field names are case-sensitive (did you mean "a"?)`},
		{"a key twice in two cases refused", `{"a":1,"A":2}`, true, `unknown field "A": field names are case-sensitive (did you mean "a"?)`},
		{"a key in another case allowed without the unknown-field check", `{"A":1}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v body
			err := DecodeStrict([]byte(tt.body), &v, tt.disallowUnknown)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("DecodeStrict = %v, want nil", err)
			case tt.want == "" && v.A != 1:
				t.Fatalf("DecodeStrict decoded %+v, want a = 1", v)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("DecodeStrict = %v, want %q", err, tt.want)
			}
		})
	}
	if err := DecodeStrict([]byte(`{"a":1}]`), new(body), true); !errors.Is(err, ErrTrailingData) {
		t.Errorf("DecodeStrict = %v, want ErrTrailingData", err)
	}
}

// BenchmarkCheckDuplicates walks a change request body of 50 files, the
// check every API and callback body goes through.
func BenchmarkCheckDuplicates(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"subject_id":"g4","target_key":"prod","project":"group/repo","title":"t","requested_by":"alice","files":[`)
	for i := range 50 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"path":"dir/file` + strconv.Itoa(i) + `.yaml","content":"a: 1\nb: 2\n","action":"update","meta":{"x":{"y":1}}}`)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckDuplicates(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeStrictKeyCaseNested: a key in another case is found at any
// depth, named with its JSON path; maps and raw values take any key.
func TestDecodeStrictKeyCaseNested(t *testing.T) {
	t.Parallel()
	type file struct {
		Path string `json:"path"`
	}
	type body struct {
		Files  []file            `json:"files"`
		Labels map[string]string `json:"labels"`
		Ext    json.RawMessage   `json:"ext"`
	}
	tests := []struct{ body, want string }{
		{`{"files":[{"path":"a"},{"PATH":"b"}]}`, `unknown field "files[1].PATH": field names are case-sensitive (did you mean "path"?)`},
		{`{"Files":[]}`, `unknown field "Files": field names are case-sensitive (did you mean "files"?)`},
		{`{"labels":{"Path":"x"},"ext":{"Files":1}}`, ""},
	}
	for _, tt := range tests {
		var v body
		err := DecodeStrict([]byte(tt.body), &v, true)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.body, got, tt.want)
		}
	}
}
