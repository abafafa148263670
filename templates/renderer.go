// Package templates owns the Markdown that changebot writes on merge
// requests: the status comment (DESIGN §7) and the short replies to
// commands. Templates are Go text/template files embedded in the binary and
// overridable, file by file, from a directory.
//
// The package is pure: rendering is a function of the view passed in. It
// must not read the store, call GitLab or decide a change's state, hint or
// permissions; it imports nothing of changebot.
package templates

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"time"
)

// MarkerPrefix starts the hidden first line of every status comment; the
// whole line is Marker(operationID). The bot finds its status comment on a
// merge request by this prefix.
const MarkerPrefix = "<!-- changebot:status"

// Marker returns the hidden HTML comment that is the first line of the status
// comment of operation operationID, for example
// "<!-- changebot:status operation_id=op_01J… -->". operationID must not
// contain "-->" (operation ids are ULIDs with a prefix).
func Marker(operationID string) string {
	return MarkerPrefix + " operation_id=" + operationID + " -->"
}

// ParseMarker returns the operation id of a status comment's body, read from
// its first line, and whether that line is a marker.
func ParseMarker(body string) (operationID string, ok bool) {
	first, _, _ := strings.Cut(body, "\n")
	first = strings.TrimRight(first, " \t\r")
	rest, ok := strings.CutPrefix(first, MarkerPrefix+" operation_id=")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, " -->")
	if !ok || id == "" || strings.ContainsAny(id, " \t") {
		return "", false
	}
	return id, true
}

// Reply kinds, the names Renderer.Reply accepts. Each has its own template
// file "reply_<kind>.md.tmpl" and data type.
const (
	// ReplyHelp lists the commands the commenter may run now (HelpReply).
	ReplyHelp = "help"
	// ReplyUnknownCommand answers unknown commands (UnknownCommandReply).
	ReplyUnknownCommand = "unknown_command"
	// ReplyRefused answers a command the commenter may not run (RefusedReply).
	ReplyRefused = "refused"
	// ReplyNoChange answers commands on a merge request without a change
	// (NoChangeReply).
	ReplyNoChange = "no_change"
	// ReplyRateLimited answers a user over the command rate limit
	// (RateLimitedReply).
	ReplyRateLimited = "rate_limited"
	// ReplyQueue answers /freeze and /unfreeze with the state of the
	// branch's merge queue (QueueReply).
	ReplyQueue = "queue"
)

// Template file names.
const (
	statusFile  = "status.md.tmpl"
	partialFile = "commands_table.md.tmpl"
)

// replyTypes maps each reply kind to the data type its template expects.
var replyTypes = map[string]reflect.Type{
	ReplyHelp:           reflect.TypeFor[HelpReply](),
	ReplyUnknownCommand: reflect.TypeFor[UnknownCommandReply](),
	ReplyRefused:        reflect.TypeFor[RefusedReply](),
	ReplyNoChange:       reflect.TypeFor[NoChangeReply](),
	ReplyRateLimited:    reflect.TypeFor[RateLimitedReply](),
	ReplyQueue:          reflect.TypeFor[QueueReply](),
}

func replyFile(kind string) string { return "reply_" + kind + ".md.tmpl" }

//go:embed *.md.tmpl
var embedded embed.FS

// RendererOpts are the optional settings of NewRenderer; nil means defaults.
type RendererOpts struct {
	// Dir, when set, is a directory whose template files replace the
	// embedded files of the same name (status.md.tmpl,
	// commands_table.md.tmpl, reply_<kind>.md.tmpl); files it lacks keep
	// the embedded version. A *.tmpl file there with any other name is an
	// error, so that a misspelt override is not silently ignored.
	Dir string
	// MaxStatusChars, when positive, is the longest status comment in
	// characters (tests); 0 means the platform's comment limit
	// (MaxNoteCharsOn). A platform's lower limit still applies.
	MaxStatusChars int
}

// Renderer renders the status comment and replies. It is safe for
// concurrent use.
type Renderer struct {
	maxStatus int
	status    *template.Template
	replies   map[string]*template.Template
}

// NewRenderer parses the templates, embedded or overridden by opts.Dir, and
// executes each once on sample data, so that a broken override fails at
// start-up rather than on the first comment. It returns every error found,
// naming the file; it never falls back to the embedded template for a file
// that fails.
func NewRenderer(opts *RendererOpts) (*Renderer, error) {
	if opts == nil {
		opts = &RendererOpts{}
	}
	sources, err := loadSources(opts.Dir)
	if err != nil {
		return nil, err
	}
	r := &Renderer{replies: make(map[string]*template.Template, len(replyTypes)), maxStatus: opts.MaxStatusChars}
	if r.maxStatus <= 0 {
		r.maxStatus = MaxNoteChars
	}
	var errs []error
	r.status, err = parseSet(sources, statusFile)
	errs = append(errs, err)
	for kind := range replyTypes {
		t, err := parseSet(sources, replyFile(kind))
		errs = append(errs, err)
		r.replies[kind] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := r.selfCheck(); err != nil {
		return nil, err
	}
	return r, nil
}

// source is one template file's text and where it came from.
type source struct {
	text string
	path string
}

// loadSources reads the embedded template files and replaces those that dir
// overrides.
func loadSources(dir string) (map[string]source, error) {
	names := []string{statusFile, partialFile}
	for kind := range replyTypes {
		names = append(names, replyFile(kind))
	}
	sources := make(map[string]source, len(names))
	for _, name := range names {
		b, err := embedded.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded template %s: %w", name, err)
		}
		sources[name] = source{text: string(b), path: "embedded " + name}
	}
	if dir == "" {
		return sources, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading template directory: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tmpl") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if _, ok := sources[e.Name()]; !ok {
			slices.Sort(names)
			return nil, fmt.Errorf("loading template %s: unknown template name, want one of %s", path, strings.Join(names, ", "))
		}
		b, err := fs.ReadFile(os.DirFS(dir), e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading template %s: %w", path, err)
		}
		sources[e.Name()] = source{text: string(b), path: path}
	}
	return sources, nil
}

// parseSet parses the template file name together with the shared partial
// templates.
func parseSet(sources map[string]source, name string) (*template.Template, error) {
	src := sources[name]
	t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(src.text)
	if err != nil {
		return nil, fmt.Errorf("parsing template %s: %w", src.path, err)
	}
	partial := sources[partialFile]
	if _, err := t.New(partialFile).Parse(partial.text); err != nil {
		return nil, fmt.Errorf("parsing template %s: %w", partial.path, err)
	}
	return t, nil
}

// selfCheck renders every template once on sample data.
func (r *Renderer) selfCheck() error {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cmds := []CommandHelp{{Usage: "/status", Description: "Re-render the status comment now.", Who: "anyone"}}
	var errs []error
	_, err := r.Status(StatusView{
		OperationID: "op_sample", Title: "t", SubjectID: "s", TargetKey: "k", RequestedBy: "r",
		Status: "HANDLE_FAILED", StepCode: 10104, StepName: "HANDLE_FAILED", Hint: "h",
		Failed: true, Detail: "d", MR: MRView{IID: 1, WebURL: "https://example.invalid/mr/1"},
		PipelineURL: "https://example.invalid/p/1", TicketID: "T-1", ApprovalURL: "https://example.invalid/t/1",
		Timeline: []TimelineEntry{{At: at, StepName: "HANDLE_FAILED", Status: "HANDLE_FAILED", Actor: "a", Source: "webhook"}},
		Commands: cmds, Seq: 1,
	})
	errs = append(errs, err)
	samples := map[string]any{
		ReplyHelp:           HelpReply{Commands: cmds},
		ReplyUnknownCommand: UnknownCommandReply{Names: []string{"x"}, Commands: cmds},
		ReplyRefused:        RefusedReply{Name: "resume", Because: BecauseApprovalSystem, Who: "operators only", Reason: "r", TicketID: "T-1", TicketURL: "https://example.invalid/t/1"},
		ReplyNoChange:       NoChangeReply{Names: []string{"retry"}},
		ReplyRateLimited:    RateLimitedReply{Limit: 10, Window: time.Minute, Until: at},
		ReplyQueue:          QueueReply{Branch: "main", Frozen: true, Already: true, By: "a", Reason: "r"},
	}
	for kind, data := range samples {
		_, err := r.Reply(kind, data)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("checking templates on sample data: %w", err)
	}
	return nil
}

// Status renders the status comment of v as Markdown. Its first line is
// Marker(v.OperationID), written by the renderer itself so that an
// overriding template cannot lose it. A comment longer than its platform's
// comment limit (MaxNoteCharsOn(v.Platform): GitLab's 1,000,000 characters,
// GitHub's 65,536), or RendererOpts.MaxStatusChars when that is lower, is
// cut and ends with "…truncated; full history at <v.HistoryURL>" (see
// Truncate), so that the platform never refuses it. It fails when
// v.OperationID is empty or the template fails.
func (r *Renderer) Status(v StatusView) (string, error) {
	if v.OperationID == "" {
		return "", errors.New("rendering status comment: operation id is empty")
	}
	body, err := execute(r.status, v)
	if err != nil {
		return "", fmt.Errorf("rendering status comment of %s: %w", v.OperationID, err)
	}
	return Truncate(Marker(v.OperationID)+"\n"+body, min(r.maxStatus, MaxNoteCharsOn(v.Platform)), v.HistoryURL), nil
}

// Reply renders the short reply of kind (ReplyHelp, ReplyUnknownCommand,
// ReplyRefused, ReplyNoChange, ReplyRateLimited, ReplyQueue) as Markdown. data must be
// the kind's data type (HelpReply for ReplyHelp, and so on) or a non-nil
// pointer to it; anything else, an unknown kind or a failing template is an
// error.
func (r *Renderer) Reply(kind string, data any) (string, error) {
	t, ok := r.replies[kind]
	if !ok {
		return "", fmt.Errorf("rendering reply: unknown reply kind %q", kind)
	}
	v := reflect.ValueOf(data)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if want := replyTypes[kind]; !v.IsValid() || v.Type() != want {
		return "", fmt.Errorf("rendering reply %q: data is %T, want templates.%s", kind, data, want.Name())
	}
	out, err := execute(t, v.Interface())
	if err != nil {
		return "", fmt.Errorf("rendering reply %q: %w", kind, err)
	}
	return out, nil
}

// execute runs t on data and tidies the Markdown.
func execute(t *template.Template, data any) (string, error) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", err
	}
	return tidy(buf.String()), nil
}

// tidy removes trailing whitespace from every line and leading and trailing
// blank lines, collapses runs of blank lines into one, and ends the text with
// one newline, so that templates can be written readably.
func tidy(s string) string {
	var b strings.Builder
	blank := false
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, " \t\r\n")
		if line == "" {
			blank = b.Len() > 0
			continue
		}
		if blank {
			b.WriteByte('\n')
			blank = false
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
