package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cycled/cycled/config"
)

// The command line is cobra's: each command defines its own flags only, cobra parses
// them, prints help (cycled help COMMAND, --help), suggests a command for a misspelled
// one, and writes shell completion (cycled completion bash|zsh|fish). The commands keep
// their exit codes: a command's body returns one, which travels back through cobra as an
// exitCode error.

// exitCode is a command's non-zero exit code, returned through cobra.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit code %d", int(c)) }

// usageError is a mistake on the command line: printed with the command's usage, exit 2.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e *usageError) Error() string { return e.err.Error() }

// body is a command's work on its parsed flags: it gets the positional arguments and
// returns the exit code.
type body func(args []string) int

// leaf returns the command described by c whose flags define declares on its flag set
// and whose work is the body define returns.
func leaf(c *cobra.Command, define func(fs *pflag.FlagSet) body) *cobra.Command {
	b := define(c.Flags())
	c.RunE = func(_ *cobra.Command, args []string) error {
		if code := b(args); code != exitOK {
			return exitCode(code)
		}
		return nil
	}
	return c
}

// parent returns a command that only holds subcommands: without one it is a usage error,
// and an unknown one is cobra's "unknown command".
func parent(c *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	c.Args = cobra.NoArgs
	c.RunE = func(c *cobra.Command, _ []string) error {
		names := ""
		for i, s := range c.Commands() {
			if i > 0 {
				names += ", "
			}
			names += s.Name()
		}
		return &usageError{c, fmt.Errorf("give a subcommand: %s", names)}
	}
	c.AddCommand(subs...)
	return c
}

// rootLong is the top-level help: what the program is, and every command.
const rootLong = `cycled is a cognitive-cycle tick scheduler: it runs tiers of modules every tick, keeps
the tick alive when they fail (retries within budgets, circuit breakers, last-known-good
values), and serves what happened over HTTP.

Commands:
  cycled [run] [flags]           run the daemon (no --config: the embedded demo)
  cycled validate [--config F]   check a configuration file; print every problem with its path
  cycled version                 print the version (also cycled --version)
  cycled healthcheck [--url U]   GET the daemon's /healthz: exit 0 when it ticks (for container
                                 health checks on images without curl)
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
  cycled advise --sim [sim flags] | --from STATE_DIR | --metrics URL [--config F]
                                 propose tier budgets, max_attempts and breaker cooldowns,
                                 each checked by re-simulation (exit 3 when nothing meets
                                 the objective)
  cycled tail [--addr URL] [--module M] [--tier T] [--severity S] [--json]
                                 follow a running daemon: one line per tick (modules off
                                 nominal only) and breaker, emergency, shedding and reload
                                 events; default $CYCLED_ADDR, else http://127.0.0.1:8080
  cycled ha status|step-down [--config F] [--json]
                                 show the active/standby group as etcd holds it, or ask
                                 the active daemon to step down (a standby takes over)
  cycled completion bash|zsh|fish
                                 print the shell completion script

Run "cycled help COMMAND" for a command's flags. Every configuration key can also be set
from the environment: CYCLED_ and the key with '.' as '_' (CYCLED_HTTP_ADDR,
CYCLED_CYCLE_PERIOD, …). Exit codes: 0 success, 1 error, 2 usage error, 3 advice not found.`

// newRoot returns the program's command tree, writing to stdout and stderr.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "cycled",
		Short: "The cycled tick scheduler daemon",
		Long:  rootLong,
		Example: `  cycled                                  # the embedded demo on http://127.0.0.1:8080
  cycled --config cycled.yaml --http-addr 0.0.0.0:8080
  cycled help sim`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{c, err} })
	leaf(root, runFlags(stdout, stderr)) // "cycled" alone runs the daemon, as "cycled run" does
	root.AddCommand(
		leaf(&cobra.Command{
			Use:   "run",
			Short: "Run the daemon (the default command)",
			Long: `Run the daemon: the tick engine on the configuration (--config, else $CYCLED_CONFIG,
else the embedded demo) and the HTTP API. SIGINT and SIGTERM stop it gracefully (exit 0);
SIGHUP reloads the configuration. Flags override the file and the environment.`,
			Example: `  cycled run --config cycled.yaml
  CYCLED_RECORDER_ENABLED=true cycled run --period 50ms`,
		}, runFlags(stdout, stderr)),
		leaf(&cobra.Command{
			Use:   "validate [--config FILE | FILE]",
			Short: "Check a configuration file and print every problem with its path",
			Long: `Load the configuration as the daemon would (the file, then the environment) and print
every problem with its path and line, one a line, then the warnings. Exit 1 when it is
invalid.`,
			Example: `  cycled validate cycled.yaml
  cycled validate --config cycled.yaml`,
		}, func(fs *pflag.FlagSet) body { return validate(fs, stdout, stderr) }),
		leaf(&cobra.Command{
			Use:     "version",
			Short:   "Print the version",
			Long:    "Print the version, the Go version and the VCS revision the binary was built from.",
			Example: "  cycled version\n  cycled --version",
			Args:    cobra.NoArgs,
		}, func(*pflag.FlagSet) body {
			return func([]string) int { fmt.Fprintln(stdout, versionString()); return exitOK }
		}),
		leaf(&cobra.Command{
			Use:   "healthcheck",
			Short: "GET the daemon's /healthz; exit 0 when it ticks",
			Long: `GET the URL (default: /healthz on the address of CYCLED_HTTP_ADDR, a wildcard host meaning
loopback) and exit 0 on a 2xx answer, 1 otherwise: a container HEALTHCHECK on images
without curl.`,
			Example: `  cycled healthcheck
  cycled healthcheck --url http://127.0.0.1:8080/readyz --timeout 1s`,
		}, func(fs *pflag.FlagSet) body { return healthcheck(fs, stdout, stderr) }),
		leaf(&cobra.Command{
			Use:   "replay",
			Short: "Print the flight recorder's timeline, or check it against this version's rules",
			Long: `Print the ticks the flight recorder holds that were not nominal, with their lines, and
the events, from the database in --state (default: the configuration's state_dir). With
--check, re-run this version's decision rules over the recorded outcomes and list every
field that would differ (exit 1 if any). The daemon records only with the recorder on
(recorder.enabled, or CYCLED_RECORDER_ENABLED=true).`,
			Example: `  cycled replay --state ./cycled-state --from 1 --to 100
  cycled replay --check --json`,
		}, func(fs *pflag.FlagSet) body { return replay(fs, stdout, stderr) }),
		parent(&cobra.Command{
			Use:   "recorder",
			Short: "Check or shrink the flight recorder's database",
			Long:  "Check the recorder's database (integrity, size, retention) or shrink it (VACUUM).",
			Example: `  cycled recorder check --state ./cycled-state
  cycled recorder vacuum`,
		}, recorderLeaf("check", "Check the database: integrity, size and retention (exit 1 on a problem)", stdout, stderr),
			recorderLeaf("vacuum", "Shrink the database file (SQLite VACUUM); stop the daemon first", stdout, stderr)),
		leaf(&cobra.Command{
			Use:   "sim",
			Short: "Run the configuration on virtual time and print what the cycle would do",
			Long: `Run the real engine on a virtual clock: nothing sleeps, and the same configuration,
scenario and seed give the same bytes. The report: budget use per tier, retries,
breakers, emergency episodes, overruns, stale keys. docs/sim.md has the scenario format.`,
			Example: `  cycled sim --for 10m
  cycled sim --config cycled.yaml --scenario outage.yaml --ticks 6000 --seed 7 --json
  cycled sim --ticks 600 --out -`,
		}, func(fs *pflag.FlagSet) body { return simCmd(fs, stdout, stderr) }),
		leaf(&cobra.Command{
			Use:   "advise",
			Short: "Propose budgets, max_attempts and cooldowns, each checked by re-simulation",
			Long: `Propose tier budgets, max_attempts and breaker cooldowns that meet the objective (every
tier exhausts its budget in at most --max-exhaustion of its ticks, p99 tick duration under
the period), each checked by re-simulation, from one of: a simulation (--sim), the flight
recorder's ticks (--from STATE_DIR), or a running daemon's (--metrics URL). When no
change meets the objective nothing is advised and the exit code is 3; --show-best also
prints the best found, under its own heading.`,
			Example: `  cycled advise --sim --config cycled.yaml --scenario outage.yaml
  cycled advise --from ./cycled-state --config cycled.yaml
  cycled advise --metrics http://127.0.0.1:8080/metrics --json`,
		}, func(fs *pflag.FlagSet) body { return adviseCmd(fs, stdout, stderr) }),
		leaf(&cobra.Command{
			Use:   "tail",
			Short: "Follow a running daemon: a line per tick and per event",
			Long: `Follow a running daemon's event stream (GET /ticks/stream): one line per tick (its id,
severity, time, wall time and start lag, and only the modules that were not nominal) and
one line per breaker, emergency, shedding or configuration change, until Ctrl-C. It
reconnects with backoff when the stream ends and says so on stderr. The daemon is --addr,
else $CYCLED_ADDR, else ` + defaultTailAddr + `.`,
			Example: `  cycled tail
  cycled tail --addr http://10.0.0.5:8080 --severity degraded
  cycled tail --module memory_recall --json`,
		}, func(fs *pflag.FlagSet) body {
			finish := tailFlags(fs)
			return func(args []string) int {
				o, code, ok := finish(args, stdout, stderr)
				if !ok {
					return code
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return runTail(ctx, o, stdout, stderr)
			}
		}),
		parent(&cobra.Command{
			Use:   "ha",
			Short: "Show the active/standby group, or ask the active daemon to step down",
			Long: `Show the active/standby group as etcd holds it, or ask the active daemon to step down
(through its admin API, so that it stops starting ticks before it resigns); the
configuration's ha section says where etcd is.`,
			Example: `  cycled ha status --config cycled.yaml
  cycled ha step-down --config cycled.yaml`,
		}, haLeaf("status", "Show the group: the active daemon, its epoch, the standbys", stdout, stderr),
			haLeaf("step-down", "Ask the active daemon to step down (a standby takes over)", stdout, stderr)),
	)
	return root
}

// runFlags defines the daemon's flags (every configuration flag) and runs it.
func runFlags(stdout, stderr io.Writer) func(fs *pflag.FlagSet) body {
	return func(fs *pflag.FlagSet) body {
		config.RegisterFlags(fs)
		return func(args []string) int {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			return serve(ctx, stop, hup, fs, args, stdout, stderr)
		}
	}
}

func recorderLeaf(action, short string, stdout, stderr io.Writer) *cobra.Command {
	return leaf(&cobra.Command{
		Use:     action,
		Short:   short,
		Long:    short + ". The database is STATE_DIR/recorder.db (--state, default: the configuration's state_dir).",
		Example: "  cycled recorder " + action + " --state ./cycled-state",
		Args:    cobra.NoArgs,
	}, func(fs *pflag.FlagSet) body { return recorderCmd(action, fs, stdout, stderr) })
}

func haLeaf(action, short string, stdout, stderr io.Writer) *cobra.Command {
	return leaf(&cobra.Command{
		Use:     action,
		Short:   short,
		Long:    short + ". The configuration's ha section names etcd and the group.",
		Example: "  cycled ha " + action + " --config cycled.yaml",
		Args:    cobra.NoArgs,
	}, func(fs *pflag.FlagSet) body { return haCmd(action, fs, stdout, stderr) })
}
