// Package ha makes daemons an active/standby group on etcd: one daemon, elected through
// go.etcd.io/etcd/client/v3/concurrency (a Session's lease and an Election), ticks; the
// others stand by, run no module, and follow the active's API so that they serve its
// latest state and can take over without starting blind.
//
// Fencing. The epoch is the election's revision (the create revision of the leader's
// key): it grows with every change of active daemon. The Node is the engine's gate
// (cycle.Gate): it admits a tick only while this daemon is active and only if the tick
// starts before the renewal deadline, which is the send time of the last successful
// lease renewal plus the lease TTL minus a safety margin. etcd revokes the lease no
// earlier than the last renewal it received plus the TTL, and another daemon is elected
// only after that revocation, so a tick admitted here starts before any other daemon can
// become active: two daemons never start ticks at once, even when this one was frozen
// (SIGSTOP) or cut off from etcd. A daemon that misses its deadline steps down.
//
// Continuity. Tick ids continue across a failover without repeating: the active reserves
// a window of ids in etcd (key <election>/tick-ids, written only while it holds the
// leadership) and extends it ahead of use; a new active starts after the highest id
// reserved. The emergency state is handed over from the last summary the standby
// followed, so a latched emergency stays latched; the last-known-good values and the open
// breakers from the active's blackboard and breakers, which the follower reads too.
package ha
