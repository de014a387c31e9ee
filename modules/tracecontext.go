package modules

import "context"

// The W3C Trace Context headers (https://www.w3.org/TR/trace-context/) a remote module's
// request carries when the daemon traces its ticks: the remote's own spans then join the
// tick's trace as children of the module's span.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// TraceContext returns the W3C trace context of the request made for a module in a tick
// (the same for every attempt: the attempts are events of one module span), as the
// traceparent and tracestate header values; an empty traceparent sends neither header.
// It is called on the module's goroutine, before each request, and must be cheap.
type TraceContext func(tick uint64, module string) (traceparent, tracestate string)

type traceKey struct{}

// WithTraceContext returns a context whose remote-module requests carry the trace
// context tc returns. The daemon wraps the scheduler's context (and step-mode requests'
// base context) with it when tracing is on; this package knows no tracing library.
func WithTraceContext(ctx context.Context, tc TraceContext) context.Context {
	return context.WithValue(ctx, traceKey{}, tc)
}

// traceHeaders returns the trace context of a request made under ctx for module in tick.
func traceHeaders(ctx context.Context, tick uint64, module string) (traceparent, tracestate string) {
	tc, _ := ctx.Value(traceKey{}).(TraceContext)
	if tc == nil {
		return "", ""
	}
	return tc(tick, module)
}
