package config

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
)

// TestLoadConfigGitHub: CHANGEBOT_PLATFORM=github needs no GitLab URL or
// token but exactly one of the robot's GitHub token and the three GitHub
// App settings (the key read from its _FILE); every problem is named and
// none quotes a secret.
func TestLoadConfigGitHub(t *testing.T) {
	t.Parallel()
	key := strings.TrimSpace(testAppKey(t, false))
	github := func(kv ...string) map[string]string {
		env := without(validEnv(), "CHANGEBOT_GITLAB_URL", "CHANGEBOT_GITLAB_TOKEN")
		return with(with(env, "CHANGEBOT_PLATFORM", "github"), kv...)
	}
	tests := []struct {
		name  string
		env   map[string]string
		want  []string // problem prefixes, in order; nil: valid
		check func(t *testing.T, c Config)
	}{
		{name: "token", env: github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret"),
			check: func(t *testing.T, c Config) {
				if c.Platform != PlatformGitHub || c.GitHubToken != "ghp-robot-secret" || c.GitHubURL != "" {
					t.Errorf("config %v", c)
				}
			}},
		{name: "app with the key from a file", env: github("CHANGEBOT_GITHUB_APP_ID", "12345",
			"CHANGEBOT_GITHUB_INSTALLATION_ID", "678", "CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE", "/run/secrets/app.pem",
			"CHANGEBOT_GITHUB_URL", "https://ghe.example/api/v3/"),
			check: func(t *testing.T, c Config) {
				if c.GitHubAppID != 12345 || c.GitHubInstallationID != 678 || c.GitHubAppPrivateKey != key ||
					c.GitHubURL != "https://ghe.example/api/v3" {
					t.Errorf("config %v", c)
				}
			}},
		{name: "neither", env: github(), want: []string{"CHANGEBOT_GITHUB_TOKEN (github_token): is required on GitHub"}},
		{name: "both", env: github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret", "CHANGEBOT_GITHUB_APP_ID", "1"),
			want: []string{"CHANGEBOT_GITHUB_TOKEN (github_token): give either the token or the GitHub App settings"}},
		{name: "app incomplete", env: github("CHANGEBOT_GITHUB_APP_ID", "1"), want: []string{
			"CHANGEBOT_GITHUB_APP_PRIVATE_KEY (github_app_private_key): is required with the other GitHub App settings",
			"CHANGEBOT_GITHUB_INSTALLATION_ID (github_installation_id): is required with the other GitHub App settings"}},
		{name: "bad app id", env: github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret", "CHANGEBOT_GITHUB_APP_ID", "-3"),
			want: []string{`CHANGEBOT_GITHUB_APP_ID: "-3" is not a positive number`}},
		{name: "reviewer is the robot", env: github("CHANGEBOT_GITHUB_TOKEN", secretReviewer1),
			want: []string{"CHANGEBOT_REVIEWER_TOKENS (reviewer_tokens): entry 1 is the robot's own CHANGEBOT_GITHUB_TOKEN"}},
		{name: "webhook secret still required", env: without(github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret"), "CHANGEBOT_WEBHOOK_SECRETS"),
			want: []string{"CHANGEBOT_WEBHOOK_SECRETS (webhook_secrets): at least one is required"}},
		{name: "unknown platform", env: with(validEnv(), "CHANGEBOT_PLATFORM", "bitbucket"),
			want: []string{`CHANGEBOT_PLATFORM (platform): "bitbucket" is not gitlab or github`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, "", tc.env, map[string]string{"/run/secrets/app.pem": key + "\n"})
			got := problemsOf(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i+1, got[i], w)
				}
			}
			for _, p := range got {
				if strings.Contains(p, "ghp-robot-secret") || strings.Contains(p, keyBody(key)) || slices.ContainsFunc(allSecrets, func(s string) bool { return strings.Contains(p, s) }) {
					t.Errorf("problem quotes a secret: %q", p)
				}
			}
			if s := c.String(); strings.Contains(s, "ghp-robot-secret") || strings.Contains(s, keyBody(key)) {
				t.Errorf("String() shows a secret: %s", s)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// testAppKey returns a new RSA private key in PEM, PKCS #1 as GitHub
// downloads it, or PKCS #8.
func testAppKey(t *testing.T, pkcs8 bool) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	if pkcs8 {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	return string(pem.EncodeToMemory(block))
}

// keyBody is the second line of a PEM key, a piece of its secret no
// message may quote.
func keyBody(key string) string { return strings.Split(key, "\n")[1] }

// TestGitHubAppPrivateKeyForms: the App's private key is accepted with real
// newlines, or on one line with each newline written \n (as many secret
// stores and env files keep it; \r\n too), PKCS #1 or #8, and the adapter
// gets the same PEM either way; anything else is a problem naming
// CHANGEBOT_GITHUB_APP_PRIVATE_KEY and saying a PEM is wanted, quoting no
// part of the key.
func TestGitHubAppPrivateKeyForms(t *testing.T) {
	t.Parallel()
	pkcs1, pkcs8 := strings.TrimSpace(testAppKey(t, false)), strings.TrimSpace(testAppKey(t, true))
	escaped := func(s string) string { return strings.ReplaceAll(s, "\n", `\n`) }
	pub, err := x509.MarshalPKIXPublicKey(&mustRSA(t, pkcs1).PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	public := strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
	tests := []struct {
		name, given, want string // want: the key the adapter gets (Config.GitHubAppPrivateKey); "" a problem
		problem           string
	}{
		{"real newlines", pkcs1, pkcs1, ""},
		{"escaped newlines", escaped(pkcs1), pkcs1, ""},
		{"escaped CRLF", strings.ReplaceAll(pkcs1, "\n", `\r\n`), pkcs1, ""},
		{"escaped PKCS #8", escaped(pkcs8), pkcs8, ""},
		{"newlines lost", strings.ReplaceAll(pkcs1, "\n", " "), "", "not PEM"},
		{"base64 without PEM lines", strings.Join(strings.Split(pkcs1, "\n")[1:4], ""), "", "not PEM"},
		{"a public key", public, "", `its PEM block "PUBLIC KEY" does not hold a private key`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := with(without(validEnv(), "CHANGEBOT_GITLAB_URL", "CHANGEBOT_GITLAB_TOKEN"), "CHANGEBOT_PLATFORM", "github",
				"CHANGEBOT_GITHUB_APP_ID", "12345", "CHANGEBOT_GITHUB_INSTALLATION_ID", "678", "CHANGEBOT_GITHUB_APP_PRIVATE_KEY", tc.given)
			c, err := load(t, "", env, nil)
			got := problemsOf(t, err)
			if tc.problem == "" {
				if len(got) > 0 {
					t.Fatalf("problems %q", got)
				}
				if c.GitHubAppPrivateKey != tc.want {
					t.Errorf("the key the adapter gets differs from the PEM given")
				}
				return
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "CHANGEBOT_GITHUB_APP_PRIVATE_KEY (github_app_private_key) (or its _FILE): ") ||
				!strings.Contains(got[0], tc.problem) || !strings.Contains(got[0], "PEM") || !strings.Contains(got[0], `written \n`) {
				t.Fatalf("problems %q, want one naming CHANGEBOT_GITHUB_APP_PRIVATE_KEY and %q", got, tc.problem)
			}
			if strings.Contains(got[0], keyBody(pkcs1)[:20]) {
				t.Errorf("the problem quotes the key: %q", got[0])
			}
		})
	}
}

func mustRSA(t *testing.T, pemKey string) *rsa.PrivateKey {
	t.Helper()
	b, _ := pem.Decode([]byte(pemKey))
	k, err := x509.ParsePKCS1PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
