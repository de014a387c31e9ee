package advise

import "testing"

func TestDaemonRoot(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080/metrics", "http://127.0.0.1:8080"},
		{"https://robot.local/cycled/metrics?x=1#f", "https://robot.local/cycled"},
		{"127.0.0.1:8080", ""},
		{"ftp://host/", ""},
		{"http:///metrics", ""},
	} {
		got, err := daemonRoot(c.in)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("daemonRoot(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
