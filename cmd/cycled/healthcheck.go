package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/cycled/cycled/config"
)

// healthcheck is "cycled healthcheck", for container HEALTHCHECKs on
// images without curl: it GETs the URL (default: /healthz on the address of
// CYCLED_HTTP_ADDR, a wildcard host meaning loopback) and exits 0 on a 2xx answer, 1
// otherwise.
func healthcheck(fs *pflag.FlagSet, stdout, stderr io.Writer) func(args []string) int {
	url := fs.String("url", "", "URL to GET (default http://<CYCLED_HTTP_ADDR>/healthz)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	return func([]string) int { return healthcheckRun(*url, *timeout, stdout, stderr) }
}

// healthcheckRun GETs url, or the default URL when it is "".
func healthcheckRun(url string, timeout time.Duration, stdout, stderr io.Writer) int {
	if url == "" {
		url = "http://" + localAddr(os.Getenv(config.EnvVar("http.addr"))) + "/healthz"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return exitError
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return exitError
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) //nolint:errcheck // only the status matters
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "healthcheck: %s answered %s\n", url, resp.Status)
		return exitError
	}
	fmt.Fprintf(stdout, "healthcheck: %s answered %s\n", url, resp.Status)
	return exitOK
}

// localAddr turns a listen address into one to connect to: the default when empty, and
// loopback for a wildcard host.
func localAddr(addr string) string {
	if addr == "" {
		return "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
