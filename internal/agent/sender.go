package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/wallprof/wallprof/internal/agent/push"
	"github.com/wallprof/wallprof/internal/linux"
)

func processExists(pid int) bool { return linux.ProcessExists(pid) }

// sender pushes one sink's spool, oldest first.
type sender struct {
	Sink
	c       *Config
	wake    chan struct{}
	drain   chan struct{} // closed: return once the spool is empty
	failing atomic.Bool   // the latest push failed
}

// add encodes w for the sink and queues it.
func (s *sender) add(w *push.Window) {
	kind := s.Endpoint.Kind
	var r push.Request
	switch kind {
	case "otlp":
		b, err := push.EncodeOTLP(w)
		if err != nil {
			s.c.Log.Printf("%s: %v", s.Endpoint, err)
			s.c.Metrics.Dropped.WithLabelValues(kind, "encode").Inc()
			return
		}
		r = push.Request{Path: push.OTLPPath, ContentType: push.OTLPContentType, Body: b}
	case "pyroscope":
		pr, err := push.EncodePyroscope(w, s.c.Limits)
		if err != nil {
			s.c.Log.Printf("%s: %v", s.Endpoint, err)
			s.c.Metrics.Dropped.WithLabelValues(kind, "encode").Inc()
			return
		}
		if pr.Merged > 0 {
			s.c.Metrics.Merged.WithLabelValues(kind).Add(float64(pr.Merged))
		}
		r = push.Request{Path: push.PyroscopePath, Query: pr.Query, ContentType: pr.ContentType, Body: pr.Body}
	}
	if s.failing.Load() || s.Spool.Len() > 0 {
		s.c.Metrics.Spooled.WithLabelValues(kind).Inc()
	}
	n, err := s.Spool.Add(r)
	if err != nil {
		s.c.Log.Printf("%s: %v", s.Endpoint, err)
		s.c.Metrics.Dropped.WithLabelValues(kind, "spool-error").Inc()
		return
	}
	if n > 0 {
		s.c.Metrics.Dropped.WithLabelValues(kind, "spool-full").Add(float64(n))
		s.c.Log.Printf("%s: the spool is full: dropped the %d oldest profiles", s.Endpoint, n)
	}
	s.gauges()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) gauges() {
	s.c.Metrics.Queued.WithLabelValues(s.Endpoint.Kind).Set(float64(s.Spool.Len()))
	s.c.Metrics.QueuedB.WithLabelValues(s.Endpoint.Kind).Set(float64(s.Spool.Bytes()))
}

// run sends until ctx ends, or until drain is closed and the spool is
// empty.
func (s *sender) run(ctx context.Context) {
	kind := s.Endpoint.Kind
	failures := 0
	for {
		id, r, ok := s.Spool.Next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-s.drain:
				if s.Spool.Len() == 0 {
					return
				}
			case <-s.wake:
			}
			continue
		}
		rej, err := s.Endpoint.Send(ctx, r)
		var pe *push.Error
		switch {
		case err == nil:
			s.Spool.Done(id)
			s.c.Metrics.Pushed.WithLabelValues(kind).Inc()
			s.c.Metrics.PushedB.WithLabelValues(kind).Add(float64(len(r.Body)))
			if rej != nil {
				s.c.Metrics.Dropped.WithLabelValues(kind, "rejected").Add(float64(rej.Profiles))
				s.c.Log.Printf("%s accepted part of a request: %d profiles rejected: %s", s.Endpoint, rej.Profiles, rej.Message)
			}
			if s.failing.Load() {
				s.c.Log.Printf("%s: pushing again after %d failed attempts", s.Endpoint, failures)
			}
			s.failing.Store(false)
			failures = 0
			s.gauges()
			continue
		case errors.As(err, &pe) && !pe.Retryable:
			s.Spool.Done(id)
			s.c.Metrics.Dropped.WithLabelValues(kind, "rejected").Inc()
			s.c.Log.Printf("%v: dropped the profile", err)
			s.gauges()
			continue
		}
		s.Spool.Release(id)
		if ctx.Err() != nil {
			return
		}
		s.c.Metrics.Retries.WithLabelValues(kind).Inc()
		d := s.c.Backoff.Delay(failures)
		if pe != nil && pe.RetryAfter > d {
			d = min(pe.RetryAfter, max(s.c.Backoff.Max, time.Minute))
		}
		if !s.failing.Load() {
			s.c.Log.Printf("%v: retrying with backoff; profiles wait in the spool", err)
		}
		s.failing.Store(true)
		failures++
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}
