package lastgood

import "github.com/cycled/cycled/internal/setting"

// Check reports a TTL out of its bounds. The field is "" (the TTL is one setting, "ttl",
// in a module's configuration): a zero Fixed, K, Min or Max means its default. The one
// set of rules for a TTL.
func (t TTL) Check() error {
	var es []*setting.Error
	if t.Fixed < 0 {
		es = append(es, setting.Errorf("", "must be >= 0"))
	}
	if t.Auto && t.Max > 0 && t.Min > t.Max {
		es = append(es, setting.Errorf("", "auto TTL min %s is above max %s", t.Min, t.Max))
	}
	return setting.Join(es)
}
