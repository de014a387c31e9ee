module github.com/cycled/cycled/daemon/natsexport

go 1.26.0

require (
	github.com/cycled/cycled v0.0.0-00010101000000-000000000000
	github.com/nats-io/nats.go v1.56.0
	go.uber.org/zap v1.28.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
