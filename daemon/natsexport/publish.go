package natsexport

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// run is the publisher: it makes sure the stream exists, then publishes the buffer in
// order until it is closed and empty, or Close's wait is over.
func (x *Exporter) run() {
	defer close(x.done)
	for !x.ensureStream() {
		if !x.pause() {
			x.dropRest()
			return
		}
	}
	for m := range x.ch {
		if !x.publish(m) {
			x.dropped.Add(1)
			x.dropRest()
			return
		}
	}
}

// ensureStream creates the stream when it does not exist; false when JetStream did not
// answer.
func (x *Exporter) ensureStream() bool {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	_, err := x.js.Stream(ctx, x.opts.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = x.js.CreateStream(ctx, jetstream.StreamConfig{Name: x.opts.Stream, Subjects: []string{x.opts.Subject + ".>"},
			Duplicates: dupWindow, Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil
		}
	}
	if err != nil {
		x.log.Warn("nats stream not ready", zap.String("stream", x.opts.Stream), zap.Error(err))
		return false
	}
	return true
}

// publish publishes m, retrying with the same id until JetStream acknowledges it; false
// when Close's wait ended first.
func (x *Exporter) publish(m message) bool {
	data, err := x.encode(m)
	if err != nil {
		x.log.Error("export: cannot encode", zap.String("id", m.id), zap.Error(err))
		x.dropped.Add(1) // it can never be published: no retry
		return true
	}
	msg := nats.NewMsg(m.subject)
	msg.Data = data
	msg.Header.Set(HeaderKind, m.kind)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		_, err := x.js.PublishMsg(ctx, msg, jetstream.WithMsgID(m.id))
		cancel()
		if err == nil {
			x.published.Add(1)
			return true
		}
		x.log.Debug("export: publish failed; retrying", zap.String("id", m.id), zap.Error(err))
		if !x.pause() {
			return false
		}
	}
}

// encode returns m's JSON.
func (x *Exporter) encode(m message) ([]byte, error) {
	if m.summary != nil {
		return json.Marshal(m.summary)
	}
	return json.Marshal(m.value)
}

// pause waits retryWait; false when Close's wait is over.
func (x *Exporter) pause() bool {
	t := time.NewTimer(retryWait)
	defer t.Stop()
	select {
	case <-x.stop:
		return false
	case <-t.C:
		return true
	}
}

// dropRest counts what is left in the (closed) buffer as dropped.
func (x *Exporter) dropRest() {
	for range x.ch {
		x.dropped.Add(1)
	}
}
