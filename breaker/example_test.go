package breaker_test

import (
	"fmt"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
)

func ExampleBreaker() {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	b := breaker.New(breaker.Settings{Name: "lidar", FailureThreshold: 2, Cooldown: 10 * time.Second},
		breaker.WithClock(clk),
		breaker.WithListener(func(t breaker.Transition) {
			fmt.Printf("%s: %v -> %v (%s) at %s\n", t.Name, t.From, t.To, t.Reason, t.At.Format(time.TimeOnly))
		}))

	// Two failed ticks open the breaker.
	for range 2 {
		p := b.Acquire()
		b.Failure(p, fault.KindTransient)
	}
	fmt.Println("next tick:", b.Acquire().Kind())

	// After the cooldown the next tick runs as a probe; its success closes the breaker.
	clk.Advance(10 * time.Second)
	p := b.Acquire()
	fmt.Println("next tick:", p.Kind())
	b.Success(p)
	fmt.Println("state:", b.State())

	// Output:
	// lidar: closed -> open (failure threshold reached) at 00:00:00
	// next tick: refused
	// lidar: open -> half_open (cooldown elapsed) at 00:00:10
	// next tick: probe
	// lidar: half_open -> closed (probes succeeded) at 00:00:10
	// state: closed
}
