package ha

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// dial returns an etcd client of o (it connects lazily).
func dial(o Options) (*clientv3.Client, error) {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: o.Endpoints, DialTimeout: o.DialTimeout,
		Username: o.Username, Password: o.Password, TLS: o.TLS, Logger: log.Named("etcd").WithOptions(zap.IncreaseLevel(zap.ErrorLevel))})
	if err != nil {
		return nil, fmt.Errorf("ha: etcd client: %w", err)
	}
	return cli, nil
}

// GroupView is a group as etcd holds it ("cycled ha status").
type GroupView struct {
	// Election is the election's name.
	Election string `json:"election"`
	// Active is the leader, nil when there is none.
	Active *Leader `json:"active"`
	// Candidates are every daemon in the election, the leader first, then in the order
	// in which they would take over.
	Candidates []Leader `json:"candidates"`
	// ReservedIDs is the last tick id reserved by the group's actives.
	ReservedIDs uint64 `json:"reserved_ids"`
}

// Inspect reads the group of o's election from etcd.
func Inspect(ctx context.Context, o Options) (GroupView, error) {
	v := GroupView{Election: o.Election}
	cli, err := dial(o)
	if err != nil {
		return v, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, max(o.DialTimeout, 1))
	defer cancel()
	resp, err := cli.Get(ctx, o.Election+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return v, fmt.Errorf("read the election %q: %w", o.Election, err)
	}
	for _, kv := range resp.Kvs {
		v.Candidates = append(v.Candidates, *parseLeader(kv.Value, kv.CreateRevision))
	}
	if len(v.Candidates) > 0 {
		l := v.Candidates[0]
		v.Active = &l
	}
	ids, err := cli.Get(ctx, IDsKey(o.Election))
	if err != nil {
		return v, fmt.Errorf("read the reserved tick ids: %w", err)
	}
	if len(ids.Kvs) > 0 {
		v.ReservedIDs, _ = strconv.ParseUint(string(ids.Kvs[0].Value), 10, 64)
	}
	return v, nil
}
