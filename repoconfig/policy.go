package repoconfig

// FileName is the path of the policy file in a repository, from its root.
const FileName = ".changebot.yml"

// MaxFileSize is the largest file Parse reads, in bytes (64 KiB); a larger
// one is refused as a whole.
const MaxFileSize = 64 << 10

// Policy is a valid `.changebot.yml`. A key the file leaves out is the
// zero value of its field (nil for a section or a number whose zero is a
// legal value), so the layers above can tell "not set" from a value.
type Policy struct {
	// Version is the file format's version (always 1).
	Version int `json:"version"`
	// Paths are the path rules, in the file's order (the first match wins).
	Paths []PathRule `json:"paths,omitempty"`
	// Approval is the approval section, nil when absent.
	Approval *Approval `json:"approval,omitempty"`
	// Queue is the queue section, nil when absent.
	Queue *Queue `json:"queue,omitempty"`
	// Merge is the merge section, nil when absent.
	Merge *Merge `json:"merge,omitempty"`
	// Notify are the notification routes, in the file's order.
	Notify []Route `json:"notify,omitempty"`
}

// PathRule maps the changed paths its glob matches to a binding.
type PathRule struct {
	// Match is the glob (see Glob for its syntax).
	Match string `json:"match"`
	// Subject is the binding's subject, with {1}, {2}, … placeholders.
	Subject string `json:"subject"`
	// Target is the binding's target, with the same placeholders.
	Target string `json:"target"`
}

// Approval is the file's approval section (server settings approval.*).
type Approval struct {
	// Provider is "external" or "gitlab", "" when not set.
	Provider string `json:"provider,omitempty"`
	// Approvers are the usernames whose approval counts, nil when not set.
	Approvers []string `json:"approvers,omitempty"`
	// Required is how many distinct approvals a change needs, 0 when not set.
	Required int `json:"required,omitempty"`
}

// Queue is the file's queue section (server settings queue.*).
type Queue struct {
	// Mode is "auto", "on" or "off", "" when not set.
	Mode string `json:"mode,omitempty"`
	// DeferCI is "auto", "on" or "off" (the server's queue.defer_ci), ""
	// when not set.
	DeferCI string `json:"defer_ci,omitempty"`
	// PipelineRetries is the number of runs again of the queue head's failed
	// pipeline, nil when not set (0 is a value).
	PipelineRetries *int `json:"pipeline_retries,omitempty"`
}

// Merge is the file's merge section (server settings merge.*).
type Merge struct {
	// MaxRounds is the rebase and re-approval rounds per change, 0 when not set.
	MaxRounds int `json:"max_rounds,omitempty"`
}

// Route sends some events of the repository's changes to one of the
// server's destinations.
type Route struct {
	// Destination is the name of a destination configured on the server
	// (the file cannot check it exists; the notifier does).
	Destination string `json:"destination"`
	// Events are notify's event names (needs_person, failed, merged, applied).
	Events []string `json:"events"`
}
