package ha

import (
	"context"
	"errors"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// window is a reserved range of tick ids, [first, last].
type window struct{ first, last uint64 }

// IDsKey returns the etcd key holding the last tick id reserved by the group's actives.
func IDsKey(election string) string { return election + "-tick-ids" }

// errNotLeader: a reservation found that this node no longer leads the election.
var errNotLeader = errors.New("no longer the leader")

// reserve reserves the next window of ids in etcd, only while el's key is still this
// node's leadership (a deposed leader's write fails). from is the last id already
// reserved by this term (0 at its start: the window starts after whatever the group
// reserved).
func (n *Node) reserve(ctx context.Context, el *concurrency.Election, from uint64) (window, error) {
	ctx, cancel := context.WithTimeout(ctx, n.opts.DialTimeout)
	defer cancel()
	key := IDsKey(n.opts.Election)
	resp, err := n.cli.Get(ctx, key)
	if err != nil {
		return window{}, err
	}
	var last uint64
	var modRev int64
	if len(resp.Kvs) > 0 {
		last, _ = strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
		modRev = resp.Kvs[0].ModRevision
	}
	w := window{first: last + 1, last: last + n.opts.IDWindow}
	if from > 0 {
		w.first = from + 1 // this term's ids go on; the window only grows
	}
	txn, err := n.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev()),
		clientv3.Compare(clientv3.ModRevision(key), "=", modRev),
	).Then(clientv3.OpPut(key, strconv.FormatUint(w.last, 10))).Commit()
	if err != nil {
		return window{}, err
	}
	if !txn.Succeeded {
		return window{}, errNotLeader
	}
	return w, nil
}
