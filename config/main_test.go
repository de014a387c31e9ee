package config_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any leaves a goroutine behind (engines, watchers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
