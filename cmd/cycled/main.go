// Command cycled is the cycled daemon: it runs the tick engine on a configuration file (or
// on the embedded demo when none is given) and serves the HTTP API.
//
//	cycled [run] [--config FILE] [--http-addr ADDR] [--log-level LEVEL] [--period D]
//	cycled validate [--config FILE | FILE]
//	cycled version
//
// main calls run once and exits with its code: 0 on success and after a graceful
// shutdown (SIGINT, SIGTERM), 1 on a runtime or configuration error, 2 on a usage error,
// 3 when cycled advise finds no change that meets its objective.
// SIGHUP reloads the configuration. The hidden "healthcheck" command GETs /healthz for
// container health checks on images without curl.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

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

const usage = `Usage:
  cycled [run] [flags]           run the daemon (no --config: the embedded demo)
  cycled validate [--config F]   check a configuration file; print every problem with its path
  cycled version                 print the version
  cycled replay [--state DIR] [--from ID] [--to ID] [--json]
                                 print the flight recorder's timeline (ticks that were not
                                 nominal, with their lines, and events)
  cycled replay --check [--state DIR] [--from ID] [--to ID] [--json]
                                 re-run this version's decision rules over the recorded
                                 outcomes; list every field that would differ (exit 1 if any)
  cycled recorder check|vacuum [--state DIR]
                                 check the recorder's database (integrity, size) or shrink it
  cycled sim [--config F] [--scenario S] [--ticks N | --for D] [--seed K] [--out DIR|-] [--json]
                                 run the configuration on virtual time (the real engine, no
                                 sleeping) and print what the cycle would do
  cycled advise --sim [sim flags] | --from STATE_DIR [--config F]
                                 propose tier budgets, max_attempts and breaker cooldowns,
                                 each checked by re-simulation (before and after shown)
  cycled tail [--addr URL] [--module M] [--tier T] [--severity S] [--json]
                                 follow a running daemon: one line per tick (modules off
                                 nominal only) and breaker, emergency, shedding and reload
                                 events; default $CYCLED_ADDR, else http://127.0.0.1:8080
  cycled ha status|step-down [--config F] [--json]
                                 show the active/standby group as etcd holds it, or ask
                                 the active daemon to step down (a standby takes over)

Run "cycled run --help" for the flags. Every configuration key can also be set from the
environment: CYCLED_ and the key with '.' as '_' (CYCLED_HTTP_ADDR, CYCLED_CYCLE_PERIOD, …).
`

// run is the whole program: it parses args, runs the subcommand and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd, rest := "run", args
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || args[0] == "-h" || args[0] == "--help") {
		cmd, rest = args[0], args[1:] // "cycled --help" is the program's usage, not run's flags
	}
	switch cmd {
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		return serve(ctx, stop, hup, rest, stdout, stderr)
	case "validate":
		return validate(rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "healthcheck":
		return healthcheck(rest, stdout, stderr)
	case "replay":
		return replay(rest, stdout, stderr)
	case "recorder":
		return recorderCmd(rest, stdout, stderr)
	case "sim":
		return simCmd(rest, stdout, stderr)
	case "advise":
		return adviseCmd(rest, stdout, stderr)
	case "ha":
		return haCmd(rest, stdout, stderr)
	case "tail":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runTail(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "cycled: unknown command %q\n\n%s", cmd, usage)
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

// newFlags returns the flag set of "cycled run", with every configuration flag.
func newFlags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	config.RegisterFlags(fs)
	return fs
}

// parseFlags parses args into fs; it returns an exit code when the program should stop.
// --help prints the command's usage on stdout (exit 0); a bad flag prints the error and the
// usage on stderr (exit 2), so that a typo never ends the program in silence.
func parseFlags(fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	fs.SetOutput(io.Discard) // the answers below are the only output
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, pflag.ErrHelp):
		printUsage(stdout, fs)
		return exitOK, true
	}
	fmt.Fprintf(stderr, "cycled %s: %v\n\n", fs.Name(), err)
	printUsage(stderr, fs)
	return exitUsage, true
}

// printUsage writes a subcommand's usage line and flags.
func printUsage(w io.Writer, fs *pflag.FlagSet) {
	line := "cycled " + fs.Name() + " [flags]"
	if fs.Name() == "validate" {
		line = "cycled validate [--config FILE | FILE]"
	}
	fmt.Fprintf(w, "Usage:\n  %s\n\nFlags:\n%s", line, fs.FlagUsages())
}

// validate is "cycled validate": it loads the configuration as the daemon would and prints
// every problem with its path, one per line, on stdout.
func validate(args []string, stdout, stderr io.Writer) int {
	// Only --config: the other configuration flags change nothing a file is checked for.
	fs := pflag.NewFlagSet("validate", pflag.ContinueOnError)
	fs.String("config", "", "configuration file (YAML); default $CYCLED_CONFIG, else the embedded demo")
	if code, stop := parseFlags(fs, args, stdout, stderr); stop {
		return code
	}
	var opts []config.LoadOption
	switch fs.NArg() {
	case 0:
	case 1:
		if fs.Changed("config") {
			fmt.Fprintln(stderr, "cycled validate: give the file either as an argument or with --config")
			return exitUsage
		}
		opts = append(opts, config.WithFile(fs.Arg(0)))
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
