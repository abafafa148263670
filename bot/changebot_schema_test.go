package bot

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"changebot/repoconfig"
)

// TestChangebotSchemaServed (issue 25 point 2): the bot serves the JSON
// Schema of .changebot.yml at GET /api/v1/schema/changebot.yml without a
// token, as application/schema+json, byte for byte repoconfig.Schema, and
// the exchange is validated against the OpenAPI document.
func TestChangebotSchemaServed(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 0)
	startBot(t, env)
	before := openAPIValidator.checked.Load()
	resp, err := http.Get(env.BaseURL + "/api/v1/schema/changebot.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/schema+json" || !bytes.Equal(body, repoconfig.Schema()) {
		t.Fatalf("GET /api/v1/schema/changebot.yml = %d %q, %d bytes; want 200 application/schema+json, the embedded schema", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if openAPIValidator.checked.Load() == before {
		t.Error("the exchange was not validated against the document")
	}
}
