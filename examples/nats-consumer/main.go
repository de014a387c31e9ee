// Command nats-consumer follows a fleet's tick summaries on NATS JetStream, as the
// daemons' export.nats publishes them: one line per summary, and the events (changes of
// active daemon, emergencies, breakers) between them.
//
// It reads the stream from its start (or only new messages with -new) through an ordered
// consumer. JetStream already dropped the duplicates of retried publishes (by their
// Nats-Msg-Id, "epoch:tick"); the consumer also ignores a summary from an epoch older
// than one it has seen: a deposed daemon's late publish.
//
//	go run ./examples/nats-consumer -url nats://127.0.0.1:4222 -stream CYCLED -subject cycled
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("url", nats.DefaultURL, "NATS server URL")
	stream := flag.String("stream", "CYCLED", "JetStream stream (export.nats.stream)")
	subject := flag.String("subject", "cycled", "subjects' prefix (export.nats.subject)")
	onlyNew := flag.Bool("new", false, "only messages published from now on")
	n := flag.Int("n", 0, "stop after this many summaries (0: follow until interrupted)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := follow(ctx, *url, *stream, *subject, *onlyNew, *n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nats-consumer:", err)
		os.Exit(1)
	}
}

// summary is the part of a summary this consumer prints.
type summary struct {
	TickID    uint64    `json:"tick_id"`
	Epoch     uint64    `json:"epoch"`
	StartedAt time.Time `json:"started_at"`
	Severity  string    `json:"overall_severity"`
	Emergency struct {
		Active bool `json:"active"`
	} `json:"emergency"`
}

// follow prints the stream's summaries and events until ctx ends or n summaries are printed.
func follow(ctx context.Context, url, stream, subject string, onlyNew bool, n int, w io.Writer) error {
	nc, err := nats.Connect(url, nats.Name("cycled nats-consumer"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject + ".>"}}
	if onlyNew {
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return err
	}
	var highest uint64
	for printed := 0; n == 0 || printed < n; {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return ignoreEnd(ctx, err)
		}
		if !strings.HasSuffix(m.Subject(), ".ticks") {
			fmt.Fprintf(w, "event %s %s\n", m.Headers().Get("Cycled-Kind"), m.Data())
			continue
		}
		var s summary
		if err := json.Unmarshal(m.Data(), &s); err != nil {
			return fmt.Errorf("message %s: %w", m.Headers().Get(jetstream.MsgIDHeader), err)
		}
		if s.Epoch < highest {
			fmt.Fprintf(w, "ignored tick %d of epoch %d: epoch %d is newer\n", s.TickID, s.Epoch, highest)
			continue
		}
		highest = s.Epoch
		fmt.Fprintf(w, "epoch %d tick %d %s %s emergency=%v\n", s.Epoch, s.TickID,
			s.StartedAt.Format(time.RFC3339Nano), s.Severity, s.Emergency.Active)
		printed++
	}
	return nil
}

// ignoreEnd returns nil for the end of ctx (an interrupt), else err.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
