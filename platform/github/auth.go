package github

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// Installation token timing (docs.github.com "Generating an installation
// access token for a GitHub App": a token expires one hour after it was
// created; "Generating a JSON Web Token for a GitHub App": the JWT lives at
// most 10 minutes and its iat should be set 60 s in the past against clock
// drift).
const (
	// TokenRenewBefore is how long before its expires_at an installation
	// token is replaced.
	TokenRenewBefore = 5 * time.Minute
	// jwtLifetime is the App JWT's exp - now (GitHub allows 10 minutes).
	jwtLifetime = 9 * time.Minute
	// jwtBackdate is how far iat is set in the past.
	jwtBackdate = 60 * time.Second
)

// AppAuth authenticates as one installation of a GitHub App.
type AppAuth struct {
	// AppID is the App's numeric id (the JWT's iss).
	AppID int64
	// InstallationID is the installation on the account that owns the
	// repositories (in every App webhook as installation.id).
	InstallationID int64
	// PrivateKeyPEM is the App's private key as GitHub downloads it (PEM,
	// PKCS#1 or PKCS#8 RSA). Never logged.
	PrivateKeyPEM []byte
}

// validate parses the key and checks the ids.
func (a *AppAuth) validate() (*rsa.PrivateKey, error) {
	var problems []error
	if a.AppID <= 0 {
		problems = append(problems, errors.New("GitHub App id must be positive"))
	}
	if a.InstallationID <= 0 {
		problems = append(problems, errors.New("GitHub App installation id must be positive"))
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(a.PrivateKeyPEM)
	if err != nil {
		// jwt's error names the PEM problem, never the key's bytes.
		problems = append(problems, fmt.Errorf("GitHub App private key: %w", err))
	}
	return key, errors.Join(problems...)
}

// appSource creates and caches the installation token, and reads the
// App's bot user. Concurrent callers share one renewal.
type appSource struct {
	cfg AppAuth
	key any // *rsa.PrivateKey
	api *gh.Client
	c   *Client

	// mu serialises renewals (held during the exchange); smu guards tok,
	// expires and old for readers such as redaction, which runs inside
	// the exchange's own error path.
	mu      sync.Mutex
	smu     sync.Mutex
	tok     string
	expires time.Time
	old     []string // earlier tokens, still redacted from errors
}

// JWT returns the App's RS256 JSON Web Token at now: iat now-60s, exp
// now+9min, iss the App id.
func (a *appSource) JWT(now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now.Add(-jwtBackdate)),
		ExpiresAt: jwt.NewNumericDate(now.Add(jwtLifetime)),
		Issuer:    strconv.FormatInt(a.cfg.AppID, 10),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(a.key)
	if err != nil {
		return "", fmt.Errorf("signing the GitHub App JWT: %w", err)
	}
	return s, nil
}

// token returns a valid installation token: the cached one until
// TokenRenewBefore before its expiry, else a new one from POST
// /app/installations/{id}/access_tokens (201, fixture
// api-apps-installation-token.json) made with the App's JWT; minted reports
// the latter (tokenFunc).
func (a *appSource) token(ctx context.Context) (tok string, minted bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.c.now()
	a.smu.Lock()
	tok, expires := a.tok, a.expires
	a.smu.Unlock()
	if tok != "" && now.Before(expires.Add(-TokenRenewBefore)) {
		return tok, false, nil
	}
	jwtStr, err := a.JWT(now)
	if err != nil {
		return "", false, err
	}
	it, err := call(withJWT(ctx, jwtStr), a.c, epInstallationToken, func(ctx context.Context) (*gh.InstallationToken, *gh.Response, error) {
		return a.api.Apps.CreateInstallationToken(ctx, a.cfg.InstallationID, nil)
	})
	if err != nil {
		return "", false, fmt.Errorf("creating an installation token for installation %d: %w", a.cfg.InstallationID, err)
	}
	a.smu.Lock()
	defer a.smu.Unlock()
	if a.tok != "" {
		a.old = append(a.old[max(len(a.old)-8, 0):], a.tok)
	}
	a.tok = it.GetToken()
	a.expires = it.GetExpiresAt().Time
	if a.expires.IsZero() {
		a.expires = now.Add(time.Hour)
	}
	return a.tok, true, nil
}

// refused forgets tok when it is the cached token GitHub just answered 401
// for (revoked, the App re-keyed, or expired before its expires_at by the
// local clock): the next token call creates a new one, with which the
// transport sends the request once more, instead of failing until
// TokenRenewBefore.
func (a *appSource) refused(tok string) {
	a.smu.Lock()
	defer a.smu.Unlock()
	if tok != "" && tok == a.tok {
		a.old = append(a.old[max(len(a.old)-8, 0):], a.tok)
		a.tok, a.expires = "", time.Time{}
	}
}

// current lists the installation tokens to redact.
func (a *appSource) current() []string {
	a.smu.Lock()
	defer a.smu.Unlock()
	return append(append([]string(nil), a.old...), a.tok)
}

// botUser reads the App (GET /app, with the JWT) and its bot user (GET
// /users/<slug>[bot]), the author of what the installation writes.
func (a *appSource) botUser(ctx context.Context) (platform.User, error) {
	jwtStr, err := a.JWT(a.c.now())
	if err != nil {
		return platform.User{}, err
	}
	app, err := call(withJWT(ctx, jwtStr), a.c, epAppGet, func(ctx context.Context) (*gh.App, *gh.Response, error) {
		return a.api.Apps.Get(ctx, "")
	})
	if err != nil {
		return platform.User{}, fmt.Errorf("reading the GitHub App: %w", err)
	}
	login := app.GetSlug() + "[bot]"
	u, err := call(ctx, a.c, epUserGet, func(ctx context.Context) (*gh.User, *gh.Response, error) {
		return a.c.robot.Users.Get(ctx, login)
	})
	if err != nil {
		return platform.User{}, fmt.Errorf("reading the App's bot user %s: %w", login, err)
	}
	return toUser(u), nil
}

// jwtKey carries the App JWT of one call to the transport.
type jwtKey struct{}

func withJWT(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, jwtKey{}, token)
}

// appTransportToken is the token function of the JWT client: the JWT the
// call carries in its context.
func appTransportToken(ctx context.Context) (string, bool, error) {
	if s, ok := ctx.Value(jwtKey{}).(string); ok && s != "" {
		return s, true, nil
	}
	return "", false, errors.New("github app call without a JWT")
}
