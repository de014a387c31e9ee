package tracing

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queueMetrics are the export queue's counters.
type queueMetrics struct {
	exported, dropped, failed prometheus.Counter
}

func newQueueMetrics(reg prometheus.Registerer) queueMetrics {
	m := queueMetrics{
		exported: prometheus.NewCounter(prometheus.CounterOpts{Name: "cycled_trace_spans_exported_total",
			Help: "Spans of the ticks' traces sent to the OTLP endpoint."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "cycled_trace_spans_dropped_total",
			Help: "Spans of the ticks' traces dropped because the export queue was full or an export failed."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "cycled_trace_export_failures_total",
			Help: "Exports of spans to the OTLP endpoint that failed."}),
	}
	if reg != nil {
		reg.MustRegister(m.exported, m.dropped, m.failed)
	}
	return m
}

// queue is the span processor: a bounded queue in front of the exporter's goroutine,
// which sends batches of at most batch spans, at least every flush. A span that finds
// the queue full is dropped and counted; nothing waits for the exporter.
type queue struct {
	exp   sdktrace.SpanExporter
	ch    chan sdktrace.ReadOnlySpan
	batch int
	flush time.Duration
	m     queueMetrics
	onErr func(error)

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newQueue(exp sdktrace.SpanExporter, s Settings, m queueMetrics) *queue {
	q := &queue{exp: exp, ch: make(chan sdktrace.ReadOnlySpan, max(s.QueueSize, 1)), batch: s.BatchSize,
		flush: s.FlushInterval, m: m, onErr: s.ExportError, stop: make(chan struct{}), done: make(chan struct{})}
	if q.batch <= 0 {
		q.batch = 512
	}
	if q.flush <= 0 {
		q.flush = time.Second
	}
	go q.run()
	return q
}

// OnStart does nothing: spans are queued when they end.
func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s, or drops it when the queue is full.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case q.ch <- s:
	default:
		q.m.dropped.Inc()
	}
}

// ForceFlush does nothing more than the exporter's goroutine does.
func (q *queue) ForceFlush(context.Context) error { return nil }

// Shutdown exports what is queued, within ctx, and shuts the exporter down.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
	}
	return q.exp.Shutdown(ctx)
}

// run sends the queued spans in batches until Shutdown, then what is left.
func (q *queue) run() {
	defer close(q.done)
	t := time.NewTicker(q.flush)
	defer t.Stop()
	buf := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	send := func() {
		if len(buf) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := q.exp.ExportSpans(ctx, buf); err != nil {
			q.m.failed.Inc()
			if q.onErr != nil {
				q.onErr(err)
			}
			q.m.dropped.Add(float64(len(buf)))
		} else {
			q.m.exported.Add(float64(len(buf)))
		}
		cancel()
		clear(buf)
		buf = buf[:0]
	}
	add := func(s sdktrace.ReadOnlySpan) {
		if buf = append(buf, s); len(buf) == q.batch {
			send()
		}
	}
	for {
		select {
		case s := <-q.ch:
			add(s)
		case <-t.C:
			send()
		case <-q.stop:
			for {
				select {
				case s := <-q.ch:
					add(s)
				default:
					send()
					return
				}
			}
		}
	}
}
