module github.com/cycled/cycled/bench

go 1.26.0

require (
	github.com/cycled/cycled v0.0.0-00010101000000-000000000000
	github.com/failsafe-go/failsafe-go v0.9.8
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/cycled/cycled => ../
