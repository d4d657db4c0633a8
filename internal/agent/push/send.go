package push

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Auth is how requests authenticate: a bearer token, or basic auth.
// Its String never shows the secrets.
type Auth struct {
	Token    string
	User     string
	Password string
}

func (a Auth) String() string {
	switch {
	case a.Token != "":
		return "bearer token"
	case a.User != "":
		return "basic auth as " + a.User
	}
	return "no authentication"
}

// Endpoint is a store to push to.
type Endpoint struct {
	Kind   string // "otlp" or "pyroscope"
	base   *url.URL
	auth   Auth
	client *http.Client
}

// NewEndpoint checks rawURL (http or https; credentials in it become basic
// auth and are never shown again) and builds the client: TLS with the
// system's roots plus the PEM certificates in caFile, if given.
func NewEndpoint(kind, rawURL, caFile string, auth Auth, timeout time.Duration) (*Endpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--%s: not a URL", kind) // the error would repeat the URL and its secrets
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--%s %s: want an http:// or https:// URL", kind, u.Redacted())
	}
	if u.User != nil {
		if auth.User == "" && auth.Token == "" {
			auth.User = u.User.Username()
			auth.Password, _ = u.User.Password()
		}
		u.User = nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate in it", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Endpoint{Kind: kind, base: u, auth: auth, client: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// String is the endpoint's URL, without credentials.
func (e *Endpoint) String() string { return e.base.Redacted() }

// Request is one encoded push.
type Request struct {
	Path        string // OTLPPath or PyroscopePath
	Query       string
	ContentType string
	Body        []byte
}

// Error is a failed push. Retryable ones (the endpoint is unreachable,
// overloaded or failing: network errors, 408, 429, 5xx) should be sent
// again later; the others (the endpoint refuses the request) never will
// succeed.
type Error struct {
	Status     int // 0 for a network error
	Retryable  bool
	RetryAfter time.Duration // what the endpoint asked for, if it did
	msg        string
}

func (e *Error) Error() string { return e.msg }

// Rejected is what an OTLP endpoint says it did not accept of a request
// it answered with success (partial success).
type Rejected struct {
	Profiles int64
	Message  string
}

// Send posts r. It returns nil or an *Error; for an OTLP endpoint that
// accepted only part of the request, also what it rejected.
func (e *Endpoint) Send(ctx context.Context, r Request) (*Rejected, error) {
	u := *e.base
	u.Path = strings.TrimSuffix(u.Path, "/") + r.Path
	u.RawQuery = r.Query
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(r.Body))
	if err != nil {
		return nil, &Error{msg: fmt.Sprintf("push to %s: %v", e, err)}
	}
	req.Header.Set("Content-Type", r.ContentType)
	req.Header.Set("User-Agent", "wallprof-agent")
	switch {
	case e.auth.Token != "":
		req.Header.Set("Authorization", "Bearer "+e.auth.Token)
	case e.auth.User != "":
		req.SetBasicAuth(e.auth.User, e.auth.Password)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which has the query
		}
		return nil, &Error{Retryable: true, msg: fmt.Sprintf("push to %s: %v", e, err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		if r.Path == OTLPPath && len(body) > 0 {
			return partialSuccess(body), nil
		}
		return nil, nil
	}
	pe := &Error{Status: resp.StatusCode}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		pe.Retryable = true
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			pe.RetryAfter = time.Duration(s) * time.Second
		}
	}
	pe.msg = fmt.Sprintf("push to %s: %s", e, resp.Status)
	if msg := firstLine(body); msg != "" && resp.Header.Get("Content-Type") != OTLPContentType {
		pe.msg += ": " + msg
	}
	return nil, pe
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// partialSuccess reads ExportProfilesServiceResponse.partial_success
// (field 1: rejected_profiles 1, error_message 2), nil when the request
// was accepted whole.
func partialSuccess(b []byte) *Rejected {
	var ps []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil
			}
			ps = v
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil
		}
		b = b[n:]
	}
	r := &Rejected{}
	for len(ps) > 0 {
		num, typ, n := protowire.ConsumeTag(ps)
		if n < 0 {
			return nil
		}
		ps = ps[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, _ := protowire.ConsumeVarint(ps)
			r.Profiles = int64(v)
		case num == 2 && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(ps)
			r.Message = string(v)
		}
		n = protowire.ConsumeFieldValue(num, typ, ps)
		if n < 0 {
			return nil
		}
		ps = ps[n:]
	}
	if r.Profiles == 0 && r.Message == "" {
		return nil
	}
	return r
}
