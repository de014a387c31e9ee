package lastgood

import (
	"time"

	"github.com/cycled/cycled/internal/setting"
)

// MaxTTL bounds a fixed TTL (and a configuration's lastgood.default_ttl): a value kept as
// good for longer than a day is a mistake (9000h for 900ms), not a setting.
const MaxTTL = 24 * time.Hour

// Check reports a TTL out of its bounds. The field is "" (the TTL is one setting, "ttl",
// in a module's configuration): a zero Fixed, K, Min or Max means its default. The one
// set of rules for a TTL.
func (t TTL) Check() error {
	var es []*setting.Error
	if t.Fixed < 0 {
		es = append(es, setting.Errorf("", "must be >= 0"))
	}
	if t.Fixed > MaxTTL {
		es = append(es, setting.Errorf("", "%v is beyond the upper bound of %v", t.Fixed, time.Duration(MaxTTL)))
	}
	if t.Auto && t.Max > 0 && t.Min > t.Max {
		es = append(es, setting.Errorf("", "auto TTL min %s is above max %s", t.Min, t.Max))
	}
	return setting.Join(es)
}
