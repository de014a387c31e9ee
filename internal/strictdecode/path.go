package strictdecode

import (
	"fmt"
	"strconv"
	"strings"
)

// Join appends key to path. A key that is empty or holds spaces, quotes, brackets or
// control characters is quoted, so that every path is non-empty and unambiguous.
func Join(path, key string) string {
	if key == "" || strings.ContainsFunc(key, func(r rune) bool {
		return r <= ' ' || r == '"' || r == '[' || r == ']' || r == 0x7f || !strconv.IsPrint(r)
	}) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index appends a list index to path: "tiers" and 2 give "tiers[2]".
func Index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// Sub appends the relative path rel ("fail_ticks[0]") to path.
func Sub(path, rel string) string {
	switch {
	case rel == "":
		return path
	case path == "":
		return rel
	}
	return path + "." + rel
}
