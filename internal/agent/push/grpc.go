package push

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// sendGRPC calls ProfilesService.Export with r's body, an encoded
// ExportProfilesServiceRequest. Failures are classified as OTLP/gRPC
// says: Canceled, DeadlineExceeded, Aborted, OutOfRange, Unavailable,
// DataLoss and ResourceExhausted may pass and are retryable (after the
// server's RetryInfo delay, if it gives one); the other codes refuse the
// request for good.
func (e *Endpoint) sendGRPC(ctx context.Context, r Request) (*Rejected, error) {
	if r.Path != OTLPPath {
		return nil, &Error{msg: fmt.Sprintf("push to %s: gRPC carries OTLP profiles only", e)}
	}
	var req collpb.ExportProfilesServiceRequest
	if err := proto.Unmarshal(r.Body, &req); err != nil {
		return nil, &Error{msg: fmt.Sprintf("push to %s: the spooled request is not an OTLP profiles request: %v", e, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	switch {
	case e.auth.Token != "":
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.auth.Token)
	case e.auth.User != "":
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization",
			"Basic "+base64.StdEncoding.EncodeToString([]byte(e.auth.User+":"+e.auth.Password)))
	}
	var resp collpb.ExportProfilesServiceResponse
	err := e.conn.Invoke(ctx, OTLPGRPCMethod, &req, &resp, grpc.WaitForReady(false))
	if err == nil {
		if ps := resp.GetPartialSuccess(); ps != nil && (ps.RejectedProfiles != 0 || ps.ErrorMessage != "") {
			return &Rejected{Profiles: ps.RejectedProfiles, Message: ps.ErrorMessage}, nil
		}
		return nil, nil
	}
	st := status.Convert(err)
	pe := &Error{msg: fmt.Sprintf("push to %s: gRPC %s: %s", e, st.Code(), firstLine([]byte(st.Message())))}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable,
		codes.DataLoss, codes.ResourceExhausted:
		pe.Retryable = true
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			pe.RetryAfter = max(ri.GetRetryDelay().AsDuration(), time.Duration(0))
		}
	}
	return nil, pe
}
