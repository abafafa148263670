package platform

import "testing"

// TestErrorAnswerNamesTheStatusOnce: a message that already starts with
// the status (GitLab's "404 Project Not Found", the adapters' "503 Service
// Unavailable" for an empty body) is not prefixed again (issue 21.16: a
// status comment read "GitLab answered 503 503 Service Unavailable").
func TestErrorAnswerNamesTheStatusOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		message string
		want    string
	}{
		{"the adapters' text for an empty body", 503, "503 Service Unavailable", "503 Service Unavailable"},
		{"GitLab's own message with its code", 404, "404 Project Not Found", "404 Project Not Found"},
		{"a message without the code", 422, "Source branch does not exist", "422 Source branch does not exist"},
		{"a message that starts with another number", 409, "4095 bytes is too long", "409 4095 bytes is too long"},
		{"a message that is only the code", 500, "500", "500"},
		{"no message", 502, "", "502 Bad Gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Error{Method: "POST", Path: "/projects/101/merge_requests/1/approve", Status: tt.status, Message: tt.message}
			if got := e.Answer(); got != tt.want {
				t.Errorf("Answer() = %q, want %q", got, tt.want)
			}
			if got, want := e.Error(), "POST /projects/101/merge_requests/1/approve: "+tt.want; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
		})
	}
}
