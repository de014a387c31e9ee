// Package natsexport publishes a daemon's tick summaries and events to a NATS JetStream
// stream, so that a fleet's summaries can be followed in one place.
//
// Every summary goes to <subject>.ticks and every event to <subject>.events, with the
// header Nats-Msg-Id set to "<epoch>:<tick>" (events add their kind and key): JetStream
// drops a message whose id it has seen within the stream's duplicate window, so a
// publish retried after a lost acknowledgement, or a reconnection, is delivered once.
//
// Publishing never blocks a tick: Offer puts the message in a bounded buffer and returns;
// a message that finds the buffer full is dropped and counted (Stats), as the flight
// recorder does. One goroutine publishes the buffer in order and retries a message, with
// the same id, until JetStream acknowledges it.
package natsexport
