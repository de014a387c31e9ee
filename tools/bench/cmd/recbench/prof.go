package main

import (
	"flag"
	"os"
	"runtime/pprof"
)

var cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")

// startProfile starts the CPU profile if asked; the returned function stops it.
func startProfile() func() {
	if *cpuProfile == "" {
		return func() {}
	}
	f, err := os.Create(*cpuProfile)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
