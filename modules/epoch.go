package modules

import (
	"context"
	"strconv"
)

// HeaderEpoch carries the epoch of an active/standby group's active daemon (see package
// ha) on every request to a remote module: a remote that has seen a higher epoch can
// refuse a request from a deposed daemon. Absent when the daemon runs alone.
const HeaderEpoch = "X-Cycled-Epoch"

type epochKey struct{}

// WithEpoch returns a context whose remote-module requests carry the epoch that epoch
// returns when each request is built (0: no header). The daemon wraps the scheduler's
// context with it.
func WithEpoch(ctx context.Context, epoch func() uint64) context.Context {
	return context.WithValue(ctx, epochKey{}, epoch)
}

// epochHeader returns the value of HeaderEpoch for a request made under ctx, "" for none.
func epochHeader(ctx context.Context) string {
	f, _ := ctx.Value(epochKey{}).(func() uint64)
	if f == nil {
		return ""
	}
	if e := f(); e > 0 {
		return strconv.FormatUint(e, 10)
	}
	return ""
}
