// Package clustertest runs active/standby groups of real cycled daemons (the binary, as
// separate processes) against an embedded etcd and an embedded NATS JetStream server,
// kills, freezes and cuts them off, and checks every summary of the run with
// ha/histcheck. It is its own module so that the servers, heavy and needed only here,
// stay out of the library's go.mod; the Makefile's test-ha runs it.
package clustertest
