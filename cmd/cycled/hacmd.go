package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/daemon/ha"
)

// haCmdTimeout bounds "cycled ha" commands' requests.
const haCmdTimeout = 5 * time.Second

// haCmd is "cycled ha status|step-down [--config F] [--json]": the group as etcd holds it,
// or the active daemon asked to step down (through its admin API, so that it stops
// starting ticks before it resigns: deleting its key in etcd would not fence it).
func haCmd(action string, fs *pflag.FlagSet, stdout, stderr io.Writer) func(args []string) int {
	fs.String("config", "", "configuration file (YAML) with the ha section; default $CYCLED_CONFIG")
	asJSON := fs.Bool("json", false, "print JSON")
	return func([]string) int { return haRun(action, fs, *asJSON, stdout, stderr) }
}

// haRun runs "cycled ha ACTION" with the parsed flags fs.
func haRun(action string, fs *pflag.FlagSet, asJSON bool, stdout, stderr io.Writer) int {
	cfg, err := config.Load(config.WithFlags(fs))
	if err != nil {
		fmt.Fprintln(stderr, "cycled ha:", err)
		return exitError
	}
	if !cfg.HA.Enabled() {
		fmt.Fprintln(stderr, "cycled ha: the configuration has no ha.etcd.endpoints")
		return exitError
	}
	o, err := haOptions(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "cycled ha:", err)
		return exitError
	}
	ctx, cancel := context.WithTimeout(context.Background(), haCmdTimeout)
	defer cancel()
	view, err := ha.Inspect(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "cycled ha:", err)
		return exitError
	}
	if action == "status" {
		printGroup(stdout, view, asJSON)
		return exitOK
	}
	tok := cfg.HTTP.AdminToken
	if tok == "" && len(cfg.HTTP.AdminTokens) > 0 {
		tok = cfg.HTTP.AdminTokens[0].Token // the configuration's first named token
	}
	return stepDownActive(ctx, view, tok, stdout, stderr)
}

// printGroup prints the group as etcd holds it.
func printGroup(w io.Writer, v ha.GroupView, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	fmt.Fprintf(w, "election %s: ", v.Election)
	if v.Active == nil {
		fmt.Fprintln(w, "no active daemon")
	} else {
		fmt.Fprintf(w, "active %s (epoch %d, %s)\n", v.Active.Node, v.Active.Epoch, v.Active.URL)
	}
	for i, c := range v.Candidates[min(1, len(v.Candidates)):] {
		fmt.Fprintf(w, "standby %d: %s (%s)\n", i+1, c.Node, c.URL)
	}
	fmt.Fprintf(w, "tick ids reserved up to %d\n", v.ReservedIDs)
}

// stepDownActive asks the active daemon of v to step down.
func stepDownActive(ctx context.Context, v ha.GroupView, token string, stdout, stderr io.Writer) int {
	if v.Active == nil || v.Active.URL == "" {
		fmt.Fprintln(stderr, "cycled ha step-down: no active daemon")
		return exitError
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.Active.URL+"/ha/step-down", nil)
	if err != nil {
		fmt.Fprintln(stderr, "cycled ha step-down:", err)
		return exitError
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err = errors.New(resp.Status + ": " + string(b))
	}
	if resp != nil {
		resp.Body.Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "cycled ha step-down: %s: %v\n", v.Active.Node, err)
		return exitError
	}
	fmt.Fprintf(stdout, "%s (epoch %d) stepped down\n", v.Active.Node, v.Active.Epoch)
	return exitOK
}
