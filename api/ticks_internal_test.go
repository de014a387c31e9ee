package api

import (
	"testing"
	"time"
)

func TestParseWait(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"5s", 5 * time.Second, false},
		{"250ms", 250 * time.Millisecond, false},
		{"0", 0, false},
		{"2.5", 2500 * time.Millisecond, false},
		{"30", MaxWait, false},
		{"1h", MaxWait, false},
		// Seconds too many for a time.Duration are capped, not overflowed to negative.
		{"31", MaxWait, false},
		{"9300000000", MaxWait, false}, // just over the largest Duration in seconds
		{"1e300", MaxWait, false},
		{"1e400", MaxWait, false}, // +Inf after rounding
		{"Inf", MaxWait, false},
		{"1e-400", 0, false},
		{"-1", 0, true},
		{"-1s", 0, true},
		{"-1e300", 0, true},
		{"-Inf", 0, true},
		{"NaN", 0, true},
		{"abc", 0, true},
		{"", 0, true},
	} {
		got, err := parseWait(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseWait(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
