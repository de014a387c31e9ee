// Package rtsched puts the whole process under Linux's real-time scheduling policy
// SCHED_FIFO, for a daemon whose tick must start on time while other work (its own HTTP
// clients, other processes) keeps the CPUs busy.
//
// Go runs goroutines on threads it creates and moves them between threads, so the
// policy cannot be given to one goroutine: Apply sets it on every thread of the process,
// and a thread the runtime starts later inherits it from the thread that starts it. Every
// goroutine of the process then runs at real-time priority, above every normal process of
// the machine; Linux's real-time throttling (kernel.sched_rt_runtime_us, 95% of each second
// by default) keeps the rest of the machine alive if the process spins.
//
// Setting a real-time policy needs CAP_SYS_NICE or an RLIMIT_RTPRIO of at least the
// priority (docker run --cap-add SYS_NICE, or --ulimit rtprio=N for a non-root user).
package rtsched
