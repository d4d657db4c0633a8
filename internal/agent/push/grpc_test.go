package push

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// grpcReceiver is a gRPC server that takes any method, keeps what it was
// sent, and answers with reply.
type grpcReceiver struct {
	mu     sync.Mutex
	method string
	md     metadata.MD
	req    *collpb.ExportProfilesServiceRequest
	reply  func() (*collpb.ExportProfilesServiceResponse, error)
}

func (g *grpcReceiver) handle(_ any, stream grpc.ServerStream) error {
	req := &collpb.ExportProfilesServiceRequest{}
	if err := stream.RecvMsg(req); err != nil {
		return err
	}
	method, _ := grpc.MethodFromServerStream(stream)
	md, _ := metadata.FromIncomingContext(stream.Context())
	g.mu.Lock()
	g.method, g.md, g.req = method, md, req
	reply := g.reply
	g.mu.Unlock()
	resp, err := reply()
	if err != nil {
		return err
	}
	return stream.SendMsg(resp)
}

// OTLP over gRPC: the method, the request, TLS with --ca, bearer and
// basic auth in the metadata, partial success, and the codes OTLP calls
// retryable (with RetryInfo's delay) against the others; no secret in
// errors.
func TestAgentSendGRPC(t *testing.T) {
	// A certificate for 127.0.0.1, and the CA file that trusts it.
	certSrv := httptest.NewTLSServer(nil)
	certSrv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pemOf(certSrv.Certificate().Raw), 0o600)
	cert := certSrv.TLS.Certificates[0]

	rcv := &grpcReceiver{}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})),
		grpc.UnknownServiceHandler(rcv.handle))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	url := "https://" + ln.Addr().String()
	setReply := func(f func() (*collpb.ExportProfilesServiceResponse, error)) {
		rcv.mu.Lock()
		rcv.reply = f
		rcv.mu.Unlock()
	}

	ep, err := NewGRPCEndpoint(url, ca, Auth{Token: "tok-123"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if ep.Protocol() != "grpc" {
		t.Errorf("protocol %s", ep.Protocol())
	}
	body, err := EncodeOTLP(testWindow(0))
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Path: OTLPPath, ContentType: OTLPContentType, Body: body}
	setReply(func() (*collpb.ExportProfilesServiceResponse, error) {
		return &collpb.ExportProfilesServiceResponse{PartialSuccess: &collpb.ExportProfilesPartialSuccess{
			RejectedProfiles: 2, ErrorMessage: "x"}}, nil
	})
	rej, err := ep.Send(context.Background(), req)
	if err != nil || rej == nil || rej.Profiles != 2 || rej.Message != "x" {
		t.Fatalf("Send = %+v, %v", rej, err)
	}
	rcv.mu.Lock()
	want, _ := DecodeOTLP(body)
	if rcv.method != OTLPGRPCMethod || !proto.Equal(rcv.req, want) {
		t.Errorf("call %s; request the same as sent: %v", rcv.method, proto.Equal(rcv.req, want))
	}
	if a := rcv.md.Get("authorization"); len(a) != 1 || a[0] != "Bearer tok-123" {
		t.Errorf("authorization %q", a)
	}
	rcv.mu.Unlock()

	for _, tc := range []struct {
		code       codes.Code
		retryable  bool
		retryAfter time.Duration
	}{{codes.Unavailable, true, 3 * time.Second}, {codes.ResourceExhausted, true, 0}, {codes.DeadlineExceeded, true, 0},
		{codes.InvalidArgument, false, 0}, {codes.Unauthenticated, false, 0}, {codes.PermissionDenied, false, 0}} {
		setReply(func() (*collpb.ExportProfilesServiceResponse, error) {
			st := status.New(tc.code, "refused")
			if tc.retryAfter > 0 {
				st, _ = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(tc.retryAfter)})
			}
			return nil, st.Err()
		})
		_, err := ep.Send(context.Background(), req)
		pe, ok := err.(*Error)
		if !ok || pe.Retryable != tc.retryable || pe.RetryAfter != tc.retryAfter {
			t.Errorf("%s: %#v", tc.code, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.code.String()) || strings.Contains(err.Error(), "tok-123") {
			t.Errorf("%s: error %q", tc.code, err)
		}
	}

	// Basic auth.
	setReply(func() (*collpb.ExportProfilesServiceResponse, error) {
		return &collpb.ExportProfilesServiceResponse{}, nil
	})
	basic, _ := NewGRPCEndpoint(url, ca, Auth{User: "alice", Password: "s3cret-pw"}, 5*time.Second)
	defer basic.Close()
	if rej, err := basic.Send(context.Background(), req); err != nil || rej != nil {
		t.Fatalf("Send = %+v, %v", rej, err)
	}
	rcv.mu.Lock()
	if a := rcv.md.Get("authorization"); len(a) != 1 || a[0] != "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:s3cret-pw")) {
		t.Errorf("authorization %q", a)
	}
	rcv.mu.Unlock()

	// Without --ca the certificate is refused: retryable, and no secret.
	noCA, _ := NewGRPCEndpoint(url, "", Auth{Token: "tok-123"}, 2*time.Second)
	defer noCA.Close()
	_, err = noCA.Send(context.Background(), req)
	if pe, ok := err.(*Error); !ok || !pe.Retryable || strings.Contains(err.Error(), "tok-123") {
		t.Errorf("without the CA: %v", err)
	}
	// A gRPC URL has no path.
	if _, err := NewGRPCEndpoint(url+"/v1development/profiles", ca, Auth{}, time.Second); err == nil {
		t.Error("a gRPC URL with a path was accepted")
	}
}

// An OTLP/HTTP error body is a google.rpc.Status: its message is shown.
func TestAgentSendHTTPStatusMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := proto.Marshal(&spb.Status{Code: int32(codes.InvalidArgument), Message: "proto: wrong wireType"})
		w.Header().Set("Content-Type", OTLPContentType)
		w.WriteHeader(http.StatusBadRequest)
		w.Write(b)
	}))
	defer srv.Close()
	ep, _ := NewEndpoint("otlp", srv.URL, "", Auth{}, 5*time.Second)
	_, err := ep.Send(context.Background(), Request{Path: OTLPPath, ContentType: OTLPContentType, Body: []byte{1}})
	if pe, ok := err.(*Error); !ok || pe.Retryable || !strings.HasSuffix(err.Error(), "400 Bad Request: proto: wrong wireType") {
		t.Errorf("error %v", err)
	}
}
