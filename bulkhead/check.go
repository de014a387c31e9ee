package bulkhead

import "github.com/cycled/cycled/internal/setting"

// Check reports the settings out of their bounds (each a field as a configuration file
// names it). A bulkhead has no default size: MaxInFlight must be given. The one set of
// rules for a bulkhead's settings.
func (s Settings) Check() error {
	var es []*setting.Error
	if s.MaxInFlight < 1 {
		es = append(es, setting.Errorf("max_in_flight", "must be >= 1"))
	}
	if s.Wait < 0 {
		es = append(es, setting.Errorf("wait", "must be >= 0"))
	}
	return setting.Join(es)
}
