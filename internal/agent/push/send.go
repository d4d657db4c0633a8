package push

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
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
	Kind    string // "otlp" or "pyroscope"
	base    *url.URL
	auth    Auth
	client  *http.Client
	conn    *grpc.ClientConn // OTLP over gRPC; nil over HTTP
	timeout time.Duration
}

// NewEndpoint checks rawURL (http or https; credentials in it become basic
// auth and are never shown again) and builds the client: TLS with the
// system's roots plus the PEM certificates in caFile, if given.
func NewEndpoint(kind, rawURL, caFile string, auth Auth, timeout time.Duration) (*Endpoint, error) {
	e, tlsConf, err := newEndpoint(kind, rawURL, caFile, auth, timeout)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	e.client = &http.Client{Transport: tr, Timeout: e.timeout}
	return e, nil
}

// NewGRPCEndpoint is an OTLP endpoint over gRPC: rawURL is
// http://HOST:PORT (no TLS) or https://HOST:PORT (TLS, verified as
// NewEndpoint does), as OpenTelemetry's exporters take it; the
// authentication goes in each call's authorization metadata. It connects
// when it first sends.
func NewGRPCEndpoint(rawURL, caFile string, auth Auth, timeout time.Duration) (*Endpoint, error) {
	e, tlsConf, err := newEndpoint("otlp", rawURL, caFile, auth, timeout)
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(e.base.Path, "/"); p != "" {
		return nil, fmt.Errorf("--otlp %s: a gRPC endpoint has no path", e)
	}
	creds := insecure.NewCredentials()
	if e.base.Scheme == "https" {
		if tlsConf == nil {
			tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(tlsConf)
	}
	host := e.base.Host
	if e.base.Port() == "" {
		host = net.JoinHostPort(e.base.Hostname(), "4317")
	}
	e.conn, err = grpc.NewClient(host, grpc.WithTransportCredentials(creds), grpc.WithUserAgent("wallprof-agent"))
	if err != nil {
		return nil, fmt.Errorf("--otlp %s: %v", e, err)
	}
	return e, nil
}

func newEndpoint(kind, rawURL, caFile string, auth Auth, timeout time.Duration) (*Endpoint, *tls.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("--%s: not a URL", kind) // the error would repeat the URL and its secrets
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, nil, fmt.Errorf("--%s %s: want an http:// or https:// URL", kind, u.Redacted())
	}
	if u.User != nil {
		if auth.User == "" && auth.Token == "" {
			auth.User = u.User.Username()
			auth.Password, _ = u.User.Password()
		}
		u.User = nil
	}
	var tlsConf *tls.Config
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("--ca %s: no PEM certificate in it", caFile)
		}
		tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Endpoint{Kind: kind, base: u, auth: auth, timeout: timeout}, tlsConf, nil
}

// Protocol is how the endpoint is spoken to: "grpc" or "http/protobuf"
// (OTel's names, as in OTEL_EXPORTER_OTLP_PROTOCOL), or "http" for
// Pyroscope.
func (e *Endpoint) Protocol() string {
	switch {
	case e.conn != nil:
		return "grpc"
	case e.Kind == "otlp":
		return "http/protobuf"
	}
	return "http"
}

// Close releases a gRPC endpoint's connection.
func (e *Endpoint) Close() error {
	if e.conn != nil {
		return e.conn.Close()
	}
	return nil
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
	if e.conn != nil {
		return e.sendGRPC(ctx, r)
	}
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
	msg := firstLine(body)
	if resp.Header.Get("Content-Type") == OTLPContentType {
		// OTLP/HTTP errors are a google.rpc.Status.
		var st spb.Status
		msg = ""
		if proto.Unmarshal(body, &st) == nil {
			msg = firstLine([]byte(st.GetMessage()))
		}
	}
	if msg != "" {
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

// partialSuccess reads ExportProfilesServiceResponse.partial_success,
// nil when the request was accepted whole (or the body is not a response).
func partialSuccess(b []byte) *Rejected {
	var resp collpb.ExportProfilesServiceResponse
	if proto.Unmarshal(b, &resp) != nil {
		return nil
	}
	ps := resp.GetPartialSuccess()
	if ps == nil || ps.RejectedProfiles == 0 && ps.ErrorMessage == "" {
		return nil
	}
	return &Rejected{Profiles: ps.RejectedProfiles, Message: ps.ErrorMessage}
}
