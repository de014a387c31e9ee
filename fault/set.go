package fault

import (
	"fmt"
	"strings"
)

// Set is a set of kinds, used for retryable kinds and for a breaker's trip_on. The zero
// value is the empty set; callers document what an empty set defaults to.
type Set uint16

// SetOf returns the set holding ks.
func SetOf(ks ...Kind) Set {
	var s Set
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

// AllFaults is every kind that is a fault: validation, contract, transient, downstream, internal.
var AllFaults = SetOf(KindValidation, KindContract, KindTransient, KindDownstream, KindInternal)

// Has reports whether k is in s.
func (s Set) Has(k Kind) bool { return k < numKinds && s&(1<<k) != 0 }

// Empty reports whether s holds no kind.
func (s Set) Empty() bool { return s == 0 }

// Kinds returns the kinds in s in table order.
func (s Set) Kinds() []Kind {
	var out []Kind
	for k := KindNone; k < numKinds; k++ {
		if s.Has(k) {
			out = append(out, k)
		}
	}
	return out
}

// String lists the kinds in s, comma separated.
func (s Set) String() string {
	ks := s.Kinds()
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k.String()
	}
	return strings.Join(parts, ",")
}

// ParseSet parses kind names into a set.
func ParseSet(names []string) (Set, error) {
	var s Set
	for i, n := range names {
		k, err := ParseKind(n)
		if err != nil {
			return 0, fmt.Errorf("[%d]: %w", i, err)
		}
		if k == KindNone {
			return 0, fmt.Errorf("[%d]: %q is not a fault kind", i, n)
		}
		s |= 1 << k
	}
	return s, nil
}
