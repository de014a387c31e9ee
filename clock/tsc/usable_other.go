//go:build !(linux && amd64)

package tsc

// usable reports false: the counter is used on Linux on amd64 only.
func usable() bool { return false }
