// Package repoconfig owns `.changebot.yml`, the policy a repository keeps
// beside the configuration it governs (issue 25 point 2): its JSON Schema
// (embedded, served by the API and documented in docs/changebot-yml.md),
// Parse, which validates a file and names every problem with its key and
// line, the typed Policy, and the binding a merge request's changed paths
// give under the file's path rules.
//
// It is a leaf: it does no I/O and imports nothing of changebot's. Reading
// the file from the repository, storing the last valid policy and merging
// it with the server's settings belong to the layers above.
package repoconfig
