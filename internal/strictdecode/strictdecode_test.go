package strictdecode_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/internal/didyoumean"
	"github.com/cycled/cycled/internal/strictdecode"
	"go.yaml.in/yaml/v3"
)

type size int64

func (s *size) UnmarshalText(b []byte) error {
	if string(b) != "1KiB" && string(b) != "1024" {
		return &time.ParseError{Value: string(b), Message: ": not a size"}
	}
	*s = 1024
	return nil
}

type inner struct {
	Budget time.Duration `yaml:"budget"`
	Tries  int           `yaml:"tries"`
}

type doc struct {
	Name  string         `yaml:"name"`
	Rate  float64        `yaml:"rate"`
	On    bool           `yaml:"on"`
	Size  size           `yaml:"size"`
	Pair  [2]uint64      `yaml:"pair"`
	Inner inner          `yaml:"inner"`
	Extra map[string]any `yaml:"extra"`
	Flat  inner          `yaml:",inline"`
}

func TestYAML(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		path   string // of the only problem; "" for none
		msg    string // in its message
		shapes int
	}{
		{"ok", "name: a\nrate: 0.5\npair: [3, 9]\ninner: {budget: 50ms}\nbudget: 1s\n", "", "", 0},
		{"typo is suggested with its line", "name: a\ninner:\n  budegt: 5ms\n", "inner.budegt", `unknown key (did you mean "budget"?) (line 3)`, 1},
		{"far key lists the known ones", "inner: {zzzzzz: 1}\n", "inner.zzzzzz", "want one of budget, tries", 1},
		{"wrong type", "on: maybe\n", "on", "want true or false", 1},
		{"array length", "pair: [1, 2, 3]\n", "pair", "want a list of 2 items", 1},
		{"bare number duration", "inner: {budget: 5}\n", "inner.budget", "give a unit", 0},
		{"text value that does not parse", "size: big\n", "size", "not a size", 0},
		{"merge key", "base: &b {tries: 2}\ninner: {<<: *b, budget: 1s}\n", "base", "unknown key", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var root yaml.Node
			if err := yaml.Unmarshal([]byte(tt.src), &root); err != nil {
				t.Fatal(err)
			}
			d := strictdecode.NewYAML()
			v := doc{Name: "default"}
			d.Decode(&root, &v, "")
			check(t, d, tt.path, tt.msg, tt.shapes)
		})
	}
}

func TestYAMLValues(t *testing.T) {
	var root yaml.Node
	src := "rate: 0.5\npair: [3, 9]\nbase: &b {tries: 2}\ninner: {<<: *b, budget: 1s}\ntries: 4\nextra: {a: [1, x]}\nname: ~\n"
	if err := yaml.Unmarshal([]byte(src), &root); err != nil {
		t.Fatal(err)
	}
	d := strictdecode.NewYAML()
	v := doc{Name: "default"}
	d.Decode(&root, &v, "")
	want := doc{Name: "default", Rate: 0.5, Pair: [2]uint64{3, 9}, Inner: inner{Budget: time.Second, Tries: 2},
		Extra: map[string]any{"a": []any{int64(1), "x"}}, Flat: inner{Tries: 4}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("decoded %+v, want %+v", v, want)
	}
	if !d.Present["inner.budget"] || d.Present["name"] {
		t.Fatalf("present %v: want inner.budget, and not the null name", d.Present)
	}
}

func TestAliasBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("extra: {x: *a8}\n")
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &root); err != nil {
		t.Fatal(err)
	}
	d := strictdecode.NewYAML()
	var v struct {
		Extra map[string]any `yaml:"extra"`
	}
	d.Decode(&root, &v, "")
	if !strings.Contains(d.Problems.Err().Error(), "document too large") {
		t.Fatalf("problems %v, want the node budget spent", d.Problems)
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		path   string
		msg    string
		shapes int
	}{
		{"ok", `{"name": "a", "rate": 1, "size": "1KiB", "inner": {"budget": "5ms"}}`, "", "", 0},
		{"size as an integer", `{"size": 1024}`, "", "", 0},
		{"string for a number", `{"rate": "0.5"}`, "rate", `want a number, got the string "0.5"`, 1},
		{"number for a duration", `{"inner": {"budget": 5}}`, "inner.budget", "want a duration string", 1},
		{"string for a bool", `{"on": "true"}`, "on", "want true or false", 1},
		{"float for an integer", `{"tries": 1.5}`, "tries", "want an integer", 1},
		{"unknown key has no line", `{"nmae": "a"}`, "nmae", `unknown key (did you mean "name"?)`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ps := strictdecode.JSONObject([]byte(tt.body), `{"name": "a"}`)
			if ps != nil {
				t.Fatal(ps)
			}
			d := strictdecode.NewJSON(reflect.TypeFor[size]())
			var v doc
			d.Decode(n, &v, "")
			check(t, d, tt.path, tt.msg, tt.shapes)
			if tt.path != "" && strings.Contains(d.Problems[0].Message, "(line") {
				t.Fatalf("a JSON body's problem names a line: %v", d.Problems)
			}
		})
	}
}

func TestJSONObjectRefusals(t *testing.T) {
	for body, msg := range map[string]string{
		``:                 "empty body: want a JSON object such as {}",
		`[1]`:              "want a JSON object such as {}",
		`{"a": 1`:          "malformed JSON",
		`{"a": 1, "a": 2}`: `duplicate key "a"`,
		`{} {}`:            "data after the object",
	} {
		n, ps := strictdecode.JSONObject([]byte(body), `{}`)
		if n != nil || len(ps) != 1 || ps[0].Path != "" || !strings.Contains(ps[0].Message, msg) {
			t.Errorf("JSONObject(%q) = %v, %v; want one problem of the whole body containing %q", body, n, ps, msg)
		}
	}
}

func check(t *testing.T, d *strictdecode.Decoder, path, msg string, shapes int) {
	t.Helper()
	if path == "" {
		if len(d.Problems) != 0 {
			t.Fatalf("problems %v, want none", d.Problems)
		}
		return
	}
	if len(d.Problems) != 1 || d.Problems[0].Path != path || !strings.Contains(d.Problems[0].Message, msg) {
		t.Fatalf("problems %v, want one at %s containing %q", d.Problems, path, msg)
	}
	if d.Shapes != shapes {
		t.Fatalf("shapes = %d, want %d (%v)", d.Shapes, shapes, d.Problems)
	}
}

func TestPaths(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{strictdecode.Join("", "tiers"), "tiers"},
		{strictdecode.Join("breakers", "llm provider"), `breakers."llm provider"`},
		{strictdecode.Join("m", ""), `m.""`},
		{strictdecode.Index("tiers", 2), "tiers[2]"},
		{strictdecode.Sub("modules[0].builtin", "fail_ticks[0]"), "modules[0].builtin.fail_ticks[0]"},
		{strictdecode.Sub("", "x"), "x"},
		{strictdecode.Sub("x", ""), "x"},
		{didyoumean.Suggest("budegt", []string{"budget", "tries"}), "budget"},
		{didyoumean.Suggest("zzzzzz", []string{"budget", "tries"}), ""},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
