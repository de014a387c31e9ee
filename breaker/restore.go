package breaker

import "time"

// ReasonHandedOver is the reason of a transition made by OpenSince.
const ReasonHandedOver = "handed over"

// OpenSince opens a closed breaker as if it had opened at openedAt: it half-opens once the
// cooldown counted from openedAt has passed (at once if it already has). A breaker that is
// not closed is left as it is, and false is returned. It is how a daemon taking over from
// another carries the other's open breakers, so that it does not call at once a
// downstream the other had found failing.
func (b *Breaker) OpenSince(openedAt time.Time) bool {
	b.mu.Lock()
	if b.state != Closed {
		b.mu.Unlock()
		return false
	}
	b.transitionLocked(Open, ReasonHandedOver, openedAt)
	b.unlock()
	return true
}
