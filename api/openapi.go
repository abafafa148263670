package api

import (
	_ "embed"
	"net/http"
	"slices"

	"changebot/repoconfig"
)

// openAPIDocument is the OpenAPI 3.1 document of the HTTP interface
// (api/openapi.json): every route under /api/v1, the webhook and callback
// intake and the health endpoints, with their requests, answers and the JSON
// error shape. The end-to-end tests validate every request and answer they
// exchange with the bot against it, so it cannot drift from the handlers.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument returns a copy of the OpenAPI 3.1 document that
// GET /api/v1/openapi.json serves.
func OpenAPIDocument() []byte { return slices.Clone(openAPIDocument) }

// serveOpenAPI answers GET /api/v1/openapi.json with the document; no token
// is needed (it holds no secret).
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDocument)
}

// serveChangebotSchema answers GET /api/v1/schema/changebot.yml with the
// JSON Schema of .changebot.yml (repoconfig.Schema); no token is needed: it
// is public documentation, like the OpenAPI document.
func serveChangebotSchema(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/schema+json")
	_, _ = w.Write(repoconfig.Schema())
}
