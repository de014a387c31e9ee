package blackboard_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/lastgood"
)

func ExampleBoard() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lg := lastgood.New()
	lg.SetTTL("camera.result", lastgood.TTL{Fixed: time.Second})
	lg.Put(lastgood.Entry{Key: "camera.result", Value: "frame-7", Module: "camera", TickID: 7, Written: t0})

	board := blackboard.New(lg)
	// Tick 8 starts 250ms after the camera's last good frame; lidar succeeded, camera failed.
	board.Begin(8, t0.Add(250*time.Millisecond))
	board.Put(blackboard.Entry{Key: "lidar.result", Value: "scan-8", Module: "lidar", TickID: 8, Source: blackboard.Live})

	for _, key := range []string{"lidar.result", "camera.result", "map.result"} {
		e, ok := board.Get(key)
		if !ok {
			fmt.Printf("%s: nothing\n", key)
			continue
		}
		fmt.Printf("%s: %v (%s, stale=%v, age=%v, degraded=%v)\n", key, e.Value, e.Source, e.Stale, e.Age, e.Degraded())
	}

	// Tick 9 starts after the camera's TTL: nothing is served, and the entry says why.
	board.Begin(9, t0.Add(time.Second))
	e, _ := board.Get("camera.result")
	b, _ := json.Marshal(e)
	fmt.Println(string(b))
	// Output:
	// lidar.result: scan-8 (live, stale=false, age=0s, degraded=false)
	// camera.result: frame-7 (last_good, stale=true, age=250ms, degraded=true)
	// map.result: nothing
	// {"key":"camera.result","value":null,"module":"camera","tick_id":7,"seq":1,"written_at":"2025-01-01T00:00:00Z","source":"none","stale":false,"expired":true,"age_ms":1000,"derived_from_stale":false}
}
