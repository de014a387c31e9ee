// Command cycled is the cycled daemon: it runs the tick engine on a configuration file (or
// on the embedded demo when none is given) and serves the HTTP API.
//
//	cycled [run] [--config FILE] [--http-addr ADDR] [--log-level LEVEL] [--period D]
//	cycled validate [--config FILE | FILE]
//	cycled version | --version
//	cycled help COMMAND, cycled completion bash|zsh|fish
//
// main calls run once and exits with its code: 0 on success and after a graceful
// shutdown (SIGINT, SIGTERM), 1 on a runtime or configuration error, 2 on a usage error,
// 3 when cycled advise finds no change that meets its objective.
// SIGHUP reloads the configuration. "healthcheck" GETs /healthz for container health
// checks on images without curl. The command line is github.com/spf13/cobra's (cli.go).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/tiers"
)

// version and commit are set at build time: -ldflags "-X main.version=v1.2.3 -X
// main.commit=abc123" (make build, make install, make docker). Without them the module
// version and the VCS revision that the Go toolchain stamps into the binary are used.
var (
	version = "dev"
	commit  = ""
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	exitUnmet = 3 // cycled advise: the objective is not met, so nothing is advised
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program: it runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	c, err := root.ExecuteC()
	var code exitCode
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n\n%s", ue.cmd.CommandPath(), ue.err, ue.cmd.UsageString())
		return exitUsage
	}
	// cobra's own: an unknown command (with its did-you-mean), or a bad argument count.
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", c.CommandPath(), strings.TrimRight(err.Error(), "\n"), c.CommandPath())
	return exitUsage
}

// buildInfo is what the binary knows of its build.
type buildInfo struct {
	version   string // "dev" when unknown
	commit    string // full VCS revision, "" when unknown
	modified  bool   // built from a tree with uncommitted changes
	goVersion string
}

// readBuildInfo returns the build's version and commit: the ldflags values first, else
// those the toolchain stamped (module version for go install pkg@version; vcs.revision
// for a build inside a checkout).
func readBuildInfo() buildInfo {
	b := buildInfo{version: version, commit: commit, goVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if b.version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && b.commit == "":
			b.commit = s.Value
		case s.Key == "vcs.modified" && commit == "":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// versionString describes the build: version, Go version and VCS revision when known.
func versionString() string {
	b := readBuildInfo()
	v := "cycled " + b.version + " (" + b.goVersion
	if rev := b.commit; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += ", commit " + rev
		if b.modified {
			v += ", modified"
		}
	}
	return v + ")"
}

// buildInfoCollector is the cycled_build_info gauge: always 1, labelled with the version,
// the commit and the Go version, so that dashboards can show what runs.
func buildInfoCollector() prometheus.Collector {
	b := readBuildInfo()
	c := b.commit
	if b.modified {
		c += "-modified"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "cycled_build_info",
		Help:        "Build of the running daemon: always 1, labelled with version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": b.version, "commit": c, "goversion": b.goVersion},
	}, func() float64 { return 1 })
}

// validate is "cycled validate": it loads the configuration as the daemon would and prints
// every problem with its path, one per line, on stdout.
func validate(fs *pflag.FlagSet, stdout, stderr io.Writer) func(args []string) int {
	// Only --config: the other configuration flags change nothing a file is checked for.
	fs.String("config", "", "configuration file (YAML); default $CYCLED_CONFIG, else the embedded demo")
	return func(args []string) int { return validateRun(fs, args, stdout, stderr) }
}

// validateRun checks the configuration of the parsed flags fs, or the file args name.
func validateRun(fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var opts []config.LoadOption
	switch len(args) {
	case 0:
	case 1:
		if fs.Changed("config") {
			fmt.Fprintln(stderr, "cycled validate: give the file either as an argument or with --config")
			return exitUsage
		}
		opts = append(opts, config.WithFile(args[0]))
	default:
		fmt.Fprintln(stderr, "cycled validate: one configuration file at most")
		return exitUsage
	}
	opts = append(opts, config.WithFlags(fs))
	cfg, err := config.Load(opts...)
	if err != nil {
		var ve *tiers.ValidationError
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
				fmt.Fprintln(stdout, p.String())
			}
			fmt.Fprintf(stderr, "invalid configuration: %d problem(s)\n", len(ve.Problems))
			return exitError
		}
		fmt.Fprintln(stdout, err)
		return exitError
	}
	for _, w := range cfg.Validate().Warnings() {
		fmt.Fprintln(stdout, "warning: "+w.String())
	}
	fmt.Fprintf(stdout, "%s: valid (%d tiers, %d modules)\n", cfg.Source(), len(cfg.Tiers), len(cfg.Modules))
	return exitOK
}
