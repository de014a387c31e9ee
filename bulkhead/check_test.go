package bulkhead_test

import (
	"testing"
	"time"

	"github.com/cycled/cycled/bulkhead"
)

func TestSettingsCheck(t *testing.T) {
	for _, c := range []struct {
		s    bulkhead.Settings
		want string
	}{
		{bulkhead.Settings{MaxInFlight: 1}, ""},
		{bulkhead.Settings{MaxInFlight: 4, Wait: time.Millisecond}, ""},
		{bulkhead.Settings{}, "max_in_flight: must be >= 1"},
		{bulkhead.Settings{MaxInFlight: 1, Wait: -1}, "wait: must be >= 0"},
	} {
		got := ""
		if err := c.s.Check(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}
