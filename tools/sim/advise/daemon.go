package advise

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cycled/cycled/faultsummary"
)

// MaxDaemonTicks is the most ticks FromDaemon reads: the newest ones.
const MaxDaemonTicks = 100_000

// daemonPage is the most ticks FromDaemon asks for in one request.
const daemonPage = 500

// FromDaemon reads the ticks a running daemon keeps (GET /ticks: its history, and its flight
// recorder's ticks when it has one), at most MaxDaemonTicks of the newest. base is the
// daemon's address ("http://127.0.0.1:8080"); a /metrics path on it is accepted and
// dropped, so that the URL a Prometheus scrape uses works too.
func FromDaemon(ctx context.Context, base string) (*Observed, error) {
	root, err := daemonRoot(base)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Timeout: 30 * time.Second}
	var all []*faultsummary.Summary
	before := uint64(0)
	for len(all) < MaxDaemonTicks {
		q := "/ticks?limit=" + strconv.Itoa(min(daemonPage, MaxDaemonTicks-len(all)))
		if before > 0 {
			q += "&before=" + strconv.FormatUint(before, 10)
		}
		page, err := getTicks(ctx, c, root+q)
		if err != nil {
			return nil, err
		}
		prev := before
		for _, s := range page {
			if before == 0 || s.TickID < before {
				before = s.TickID
			}
		}
		if len(page) == 0 || (prev != 0 && before >= prev) {
			break // the oldest tick, or a page that does not go further back
		}
		all = append(all, page...)
		if before <= 1 {
			break
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("advise: %s has no ticks yet", root)
	}
	slices.SortFunc(all, func(a, b *faultsummary.Summary) int { return cmp.Compare(a.TickID, b.TickID) })
	ob := NewObserved()
	for i, s := range all {
		if i > 0 && s.TickID == all[i-1].TickID {
			continue // a tick that moved from the history to the recorder between two pages
		}
		ob.Add(s)
	}
	return ob, nil
}

// daemonRoot returns the daemon's root URL from base.
func daemonRoot(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("advise: %q is not a daemon's http(s) address (like http://127.0.0.1:8080)", base)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/metrics")
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimSuffix(u.String(), "/"), nil
}

// getTicks reads one page of GET /ticks.
func getTicks(ctx context.Context, c *http.Client, u string) ([]*faultsummary.Summary, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("advise: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("advise: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("advise: GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("advise: GET %s: %s: %s", u, resp.Status, firstLine(body))
	}
	var page struct {
		Ticks *[]*faultsummary.Summary `json:"ticks"` // nil: no such field
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("advise: GET %s: not a page of ticks: %w", u, err)
	}
	if page.Ticks == nil {
		return nil, errors.New("advise: GET " + u + ": not a page of ticks (no \"ticks\" field): is this a cycled daemon?")
	}
	return *page.Ticks, nil
}

// firstLine returns the first line of b, at most 200 bytes.
func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
