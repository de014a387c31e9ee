// Command embedder is the smallest program that embeds the cycled engine: one safety
// module, one tick. Its module graph is what an embedding application pays for.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/tiers"
)

func main() {
	cfg := cycle.Config{Tiers: []tiers.Tier{{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1}}}
	guard := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) { return "clear", nil })
	e, err := cycle.New(cfg, []cycle.Registration{{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: &guard}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	s, err := e.Tick(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(s.TickID, s.OverallSeverity)
}
