package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the agent's own counters, in Prometheus's exposition format
// (with the process's CPU time and memory, and the Go runtime's).
type Metrics struct {
	Registry   *prometheus.Registry
	Windows    prometheus.Counter
	Recordings prometheus.Gauge
	RecordErrs prometheus.Counter
	Pushed     *prometheus.CounterVec // profiles, by sink
	PushedB    *prometheus.CounterVec // bytes, by sink
	Spooled    *prometheus.CounterVec // profiles queued behind a failure, by sink
	Queued     *prometheus.GaugeVec   // profiles waiting, by sink
	QueuedB    *prometheus.GaugeVec   // bytes waiting, by sink
	Dropped    *prometheus.CounterVec // by sink and reason
	Retries    *prometheus.CounterVec // by sink
	Merged     *prometheus.CounterVec // stacks merged into [other], by sink
}

// NewMetrics registers the agent's metrics in a registry of their own.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "wallprof_agent", Name: name, Help: help}
	}
	m := &Metrics{
		Registry:   r,
		Windows:    prometheus.NewCounter(prometheus.CounterOpts(f("windows_total", "Windows of one process's profile made."))),
		Recordings: prometheus.NewGauge(prometheus.GaugeOpts(f("recordings", "Processes being recorded."))),
		RecordErrs: prometheus.NewCounter(prometheus.CounterOpts(f("recording_errors_total", "Recordings that could not start or tick."))),
		Pushed:     prometheus.NewCounterVec(prometheus.CounterOpts(f("pushed_profiles_total", "Profiles an endpoint accepted.")), []string{"sink"}),
		PushedB:    prometheus.NewCounterVec(prometheus.CounterOpts(f("pushed_bytes_total", "Request bytes an endpoint accepted.")), []string{"sink"}),
		Spooled:    prometheus.NewCounterVec(prometheus.CounterOpts(f("spooled_profiles_total", "Profiles queued while their endpoint was failing.")), []string{"sink"}),
		Queued:     prometheus.NewGaugeVec(prometheus.GaugeOpts(f("spool_profiles", "Profiles waiting to be sent.")), []string{"sink"}),
		QueuedB:    prometheus.NewGaugeVec(prometheus.GaugeOpts(f("spool_bytes", "Bytes waiting to be sent.")), []string{"sink"}),
		Dropped:    prometheus.NewCounterVec(prometheus.CounterOpts(f("dropped_profiles_total", "Profiles dropped: spool full, rejected by the endpoint, or not sent at shutdown.")), []string{"sink", "reason"}),
		Retries:    prometheus.NewCounterVec(prometheus.CounterOpts(f("retries_total", "Pushes that failed and will be retried.")), []string{"sink"}),
		Merged:     prometheus.NewCounterVec(prometheus.CounterOpts(f("merged_stacks_total", "Stacks merged into [other] to fit the endpoint's limits.")), []string{"sink"}),
	}
	r.MustRegister(m.Windows, m.Recordings, m.RecordErrs, m.Pushed, m.PushedB, m.Spooled, m.Queued, m.QueuedB,
		m.Dropped, m.Retries, m.Merged)
	return m
}
