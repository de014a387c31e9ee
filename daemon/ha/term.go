package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// retryWait is the pause between two failed attempts to join the election.
const retryWait = 250 * time.Millisecond

// Run campaigns until ctx ends: each term joins the election, waits to be elected, is
// active while it renews its lease, and steps down when it cannot. It returns ctx's error.
func (n *Node) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := n.term(ctx); err != nil && ctx.Err() == nil {
			n.setError(err.Error())
			n.log.Warn("election", zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(retryWait):
			}
		}
	}
	return ctx.Err()
}

// term is one turn in the election, from a new lease to stepping down.
func (n *Node) term(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, n.opts.DialTimeout)
	lease, err := n.cli.Grant(gctx, int64(n.opts.LeaseTTL/time.Second))
	cancel()
	if err != nil {
		return fmt.Errorf("grant a lease: %w", err)
	}
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	sess, err := concurrency.NewSession(n.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(tctx))
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	defer n.closeSession(sess)
	el := concurrency.NewElection(sess, n.opts.Election)
	go n.observe(tctx, el)
	if err := n.campaign(tctx, sess, el); err != nil {
		return err
	}
	return n.reign(tctx, sess, el)
}

// campaign waits until el elects this node, or the session or ctx ends.
func (n *Node) campaign(ctx context.Context, sess *concurrency.Session, el *concurrency.Election) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	val, _ := json.Marshal(Leader{Node: n.opts.Node, URL: n.opts.Advertise}) //nolint:errchkjson // plain strings
	if err := el.Campaign(cctx, string(val)); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	select {
	case <-sess.Done():
		return errors.New("campaign: the lease expired")
	default:
		return nil
	}
}

// reign is the node's time as the active one: it reserves ids, hands over, admits ticks
// while it renews its lease, and steps down when it cannot, when asked, or when ctx ends.
func (n *Node) reign(ctx context.Context, sess *concurrency.Session, el *concurrency.Election) error {
	epoch := uint64(el.Rev())
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, n.opts.DialTimeout)
	ka, err := n.cli.KeepAliveOnce(rctx, sess.Lease())
	cancel()
	if err != nil {
		n.resign(el)
		return fmt.Errorf("renew the lease once elected: %w", err)
	}
	deadline := sent.Add(time.Duration(ka.TTL)*time.Second - n.opts.Margin)
	w, err := n.reserve(ctx, el, 0)
	if err != nil {
		n.resign(el)
		return fmt.Errorf("reserve tick ids: %w", err)
	}
	if n.opts.BeforeActive != nil {
		n.opts.BeforeActive(epoch)
	}
	n.mu.Lock()
	drainReasons(n.stepReq)
	n.active, n.epoch, n.deadline, n.idFloor, n.idMax = true, epoch, deadline, w.first, w.last
	n.since, n.lastErr = time.Now(), ""
	n.mu.Unlock()
	n.emit(Event{Kind: "ha_active", Node: n.opts.Node, Epoch: epoch, FirstTick: w.first, At: time.Now()})
	reason := n.renew(ctx, sess, el, w)
	n.mu.Lock()
	n.active = false // no tick starts from now on
	n.since, n.reason = time.Now(), reason
	n.mu.Unlock()
	n.emit(Event{Kind: "ha_standby", Node: n.opts.Node, Epoch: epoch, Reason: reason, At: time.Now()})
	n.resign(el)
	return nil
}

// renew renews the lease every quarter of its TTL and extends the id window when asked,
// until a renewal is late or refused, the session ends, a step-down is asked, or ctx ends;
// it returns why.
func (n *Node) renew(ctx context.Context, sess *concurrency.Session, el *concurrency.Election, w window) string {
	t := time.NewTicker(n.opts.LeaseTTL / 4)
	defer t.Stop()
	lastErr := "no renewal answered"
	for {
		select {
		case <-ctx.Done():
			return "shutting down"
		case r := <-n.stepReq:
			return r
		case <-sess.Done():
			return "the etcd session ended: lease lost"
		case <-n.extendCh:
			nw, err := n.reserve(ctx, el, w.last)
			if err != nil {
				n.log.Warn("tick id window not extended", zap.Error(err))
				continue
			}
			w = nw
			n.mu.Lock()
			n.idMax = w.last
			n.mu.Unlock()
		case <-t.C:
			if r := n.renewOnce(ctx, sess, &lastErr); r != "" {
				return r
			}
		}
	}
}

// renewOnce sends one renewal and moves the deadline on its success; it returns a
// reason to step down, or "".
func (n *Node) renewOnce(ctx context.Context, sess *concurrency.Session, lastErr *string) string {
	n.mu.Lock()
	deadline := n.deadline
	n.mu.Unlock()
	sent := time.Now()
	if !sent.Before(deadline) {
		return "etcd unreachable: lease not renewed before lease_ttl minus the safety margin (" + *lastErr + ")"
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	resp, err := n.cli.KeepAliveOnce(rctx, sess.Lease())
	cancel()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return "lease lost (expired in etcd)"
	case err != nil:
		*lastErr = err.Error()
		return ""
	}
	n.mu.Lock()
	n.deadline = sent.Add(time.Duration(resp.TTL)*time.Second - n.opts.Margin)
	n.mu.Unlock()
	return ""
}

// resign gives the leadership up at once (best effort: when etcd cannot be reached, the
// lease's expiry does it).
func (n *Node) resign(el *concurrency.Election) {
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.DialTimeout)
	defer cancel()
	if err := el.Resign(ctx); err != nil {
		n.log.Debug("resign", zap.Error(err))
	}
}

// closeSession revokes the term's lease, waiting at most the dial timeout.
func (n *Node) closeSession(sess *concurrency.Session) {
	sess.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.DialTimeout)
	defer cancel()
	if _, err := n.cli.Revoke(ctx, sess.Lease()); err != nil {
		n.log.Debug("revoke", zap.Error(err))
	}
}

// observe records the election's leader until ctx ends.
func (n *Node) observe(ctx context.Context, el *concurrency.Election) {
	for resp := range el.Observe(ctx) {
		if len(resp.Kvs) == 0 {
			continue
		}
		n.setLeader(parseLeader(resp.Kvs[0].Value, resp.Kvs[0].CreateRevision))
	}
}

// parseLeader decodes a leader key's value.
func parseLeader(val []byte, rev int64) *Leader {
	var l Leader
	if json.Unmarshal(val, &l) != nil {
		l.Node = string(val)
	}
	l.Epoch = uint64(rev)
	return &l
}

// setError records the election's last error.
func (n *Node) setError(e string) {
	n.mu.Lock()
	n.lastErr = e
	n.mu.Unlock()
}

// drainReasons empties ch: a step-down asked in an earlier term does not end this one.
func drainReasons(ch chan string) {
	select {
	case <-ch:
	default:
	}
}
