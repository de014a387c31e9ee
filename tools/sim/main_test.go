package sim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every simulation ends its goroutines: the engine's, and modules left hanging on the
// virtual clock.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
