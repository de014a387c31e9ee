package lastgood

import (
	"testing"
	"time"
)

func TestTTLCheck(t *testing.T) {
	for _, c := range []struct {
		ttl  TTL
		want string
	}{
		{TTL{}, ""},
		{TTL{Fixed: time.Second}, ""},
		{TTL{Auto: true, Min: time.Millisecond, Max: time.Second}, ""},
		{TTL{Fixed: -1}, ": must be >= 0"},
		{TTL{Fixed: MaxTTL}, ""},
		{TTL{Fixed: 9000 * time.Hour}, ": 9000h0m0s is beyond the upper bound of 24h0m0s"},
		{TTL{Auto: true, Min: time.Second, Max: time.Millisecond}, ": auto TTL min 1s is above max 1ms"},
	} {
		got := ""
		if err := c.ttl.Check(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.ttl, got, c.want)
		}
	}
}
