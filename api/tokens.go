package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync/atomic"
)

// AdminToken is one admin credential: the token, and the name the audit trail shows for
// it (empty for an unnamed token).
type AdminToken struct {
	// Name identifies the token's holder in AdminAction and the audit log line.
	Name string
	// Token is the bearer token.
	Token string
}

// Tokens is the set of admin tokens in force. Every admin request reads it; Set replaces
// it whole (a configuration reload that rotated a token file). It is safe for concurrent
// use; the zero value holds no token.
type Tokens struct {
	set atomic.Pointer[[]tokenEntry]
}

// tokenEntry is a token as kept: its SHA-256 (compared in constant time, so that neither
// the token nor its length leaks through timing), its name and its fingerprint.
type tokenEntry struct {
	name string
	sum  [sha256.Size]byte
	fp   string
}

// NewTokens returns a set holding ts (empty tokens are left out).
func NewTokens(ts ...AdminToken) *Tokens {
	t := &Tokens{}
	t.Set(ts)
	return t
}

// Set replaces the tokens in force by ts (empty tokens are left out).
func (t *Tokens) Set(ts []AdminToken) {
	es := make([]tokenEntry, 0, len(ts))
	for _, a := range ts {
		if a.Token == "" {
			continue
		}
		sum := sha256.Sum256([]byte(a.Token))
		es = append(es, tokenEntry{name: a.Name, sum: sum, fp: fingerprint(sum)})
	}
	t.set.Store(&es)
}

// Len returns the number of tokens in force.
func (t *Tokens) Len() int {
	if p := t.set.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// match returns the entry of token tok. It compares tok with every entry, whichever
// matches, so that the time taken says nothing about which entries exist.
func (t *Tokens) match(tok string) (tokenEntry, bool) {
	p := t.set.Load()
	if p == nil {
		return tokenEntry{}, false
	}
	got := sha256.Sum256([]byte(tok))
	var found tokenEntry
	ok := 0
	for _, e := range *p {
		eq := subtle.ConstantTimeCompare(got[:], e.sum[:])
		if eq == 1 {
			found = e
		}
		ok |= eq
	}
	return found, ok == 1
}
