package check

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"
)

// guardsConfig makes a step-mode daemon produce, within a few ticks, every kind of stream
// event and the summary fields of rare ticks: startup (tick 1 fails the safety module
// while starting), a breaker that opens (tick 2), an emergency entered and ended (ticks
// 3 and 4, hence emergency.ended_tick), load shedding taken and restored (the slow
// module overruns the target), and failed asynchronous runs.
const guardsConfig = `
cycle: {period: 0}
startup: {timeout: 1h}
emergency: {recover_after: 1}
shedding: {after_overruns: 1, restore_after: 1, target: 30ms}
breakers: {flaky: {failure_threshold: 1, cooldown: 1h}}
tiers:
  - {name: safety, budget: 50ms}
  - {name: knowledge, budget: 500ms}
modules:
  - {name: guard, tier: safety, builtin: {value: clear, fail_ticks: [[1, 1], [3, 3]]}}
  - {name: slow, tier: knowledge, priority: -1, builtin: {value: 1, latency: 60ms}}
  - {name: flaky, tier: knowledge, breaker: flaky, builtin: {value: 1, fail_ticks: [[2, 2]]}}
  - {name: bg, tier: knowledge, async: true, timeout: 2s, builtin: {value: 9, fail_rate: 1}}
`

// guardTicks is how many ticks guardCalls runs: enough for every event of guardsConfig.
const guardTicks = 8

// guardCalls are the calls to the guardsConfig daemon: readiness while it starts, the
// ticks, then the state they leave.
func guardCalls() []call {
	calls := []call{{method: "GET", path: "/readyz", status: 503, contains: `"starting"`}}
	for range guardTicks {
		calls = append(calls, call{method: "POST", path: "/ticks", admin: true, status: 200})
	}
	return append(calls,
		call{method: "GET", path: "/emergency", status: 200, contains: `"ended_tick"`},
		call{method: "GET", path: "/ticks?limit=10", status: 200, contains: `"shed"`},
		call{method: "GET", path: "/ticks?limit=10", status: 200, contains: `"async"`},
		call{method: "GET", path: "/modules", status: 200},
		call{method: "GET", path: "/breakers", status: 200, contains: `"state":"open"`},
	)
}

// sseEvent is one event of the stream.
type sseEvent struct{ name, data string }

// stream is a client of GET /ticks/stream reading in its own goroutine until the test ends.
type stream struct {
	events chan sseEvent // closed when the reader ends
}

// watchStream subscribes to d's stream; the subscription ends with the test.
func watchStream(t *testing.T, d *daemon) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", d.base+"/ticks/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET /ticks/stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{events: make(chan sseEvent, 256)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.name != "":
				select {
				case s.events <- ev:
				case <-ctx.Done():
					return
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// checkStream validates the stream's events, each data line against the schema the
// description gives its event (x-events of GET /ticks/stream), unknown keys refused, until
// every described event has been seen.
func checkStream(t *testing.T, desc *description, doc libopenapi.Document, s *stream) {
	t.Helper()
	op, err := desc.operation("GET", "/ticks/stream")
	if err != nil {
		t.Fatal(err)
	}
	described, _ := op["responses"].(map[string]any)["200"].(map[string]any)["x-events"].(map[string]any)
	if len(described) == 0 {
		t.Fatal("GET /ticks/stream describes no events (x-events)")
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	sv := schema_validation.NewSchemaValidator()
	seen := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for len(seen) < len(described) {
		var ev sseEvent
		select {
		case e, ok := <-s.events:
			if !ok {
				t.Fatal("the stream ended")
			}
			ev = e
		case <-timeout:
			var missing []string
			for name := range described {
				if !seen[name] {
					missing = append(missing, name)
				}
			}
			slices.Sort(missing)
			t.Fatalf("the stream sent no %v event", missing)
		}
		ref, ok := described[ev.name].(map[string]any)
		if !ok {
			t.Errorf("the stream sent a %q event, which the description does not describe", ev.name)
			continue
		}
		seen[ev.name] = true
		name := strings.TrimPrefix(ref["$ref"].(string), "#/components/schemas/")
		schema := model.Model.Components.Schemas.GetOrZero(name).Schema()
		if ok, errs := sv.ValidateSchemaString(schema, ev.data); !ok {
			for _, e := range errs {
				t.Errorf("stream event %s: %s (%s)%s", ev.name, e.Message, e.Reason, schemaErrors(e))
			}
		}
		keys, err := desc.undeclared(ref, []byte(ev.data))
		if err != nil {
			t.Errorf("stream event %s: %v", ev.name, err)
		}
		for _, k := range keys {
			t.Errorf("stream event %s has %s, which the description does not declare", ev.name, k)
		}
	}
}
