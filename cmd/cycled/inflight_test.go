package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"testing"
	"time"
)

func TestInflightListsRequestsBeingServed(t *testing.T) {
	var f inflight
	entered, release := make(chan struct{}), make(chan struct{})
	h := f.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/ticks/stream?token=secret", nil))
	}()
	<-entered
	got := f.list(time.Now().Add(time.Second))
	if len(got) != 1 || got[0][:len("GET /ticks/stream (")] != "GET /ticks/stream (" {
		t.Fatalf("in flight: %q, want the stream without its query", got)
	}
	close(release)
	<-done
	if got := f.list(time.Now()); !reflect.DeepEqual(got, []string{}) {
		t.Fatalf("after the request ended: %q, want none", got)
	}
}

// At shutdown, a connection whose client is still sending its request is closed, while a
// connection whose request is being served is not.
func TestInflightCloseReading(t *testing.T) {
	var f inflight
	entered, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{
		Handler: f.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			_, _ = w.Write([]byte("served"))
		})),
		ConnContext: f.connContext,
		ConnState:   f.connState,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()

	// One client sends half a request and stops; another has its request in a handler.
	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := slow.Write([]byte("GET /slow HTTP/1.1\r\nHost: cycled\r\n")); err != nil {
		t.Fatal(err)
	}
	served := make(chan string, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/served")
		if err != nil {
			served <- err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		served <- string(b)
	}()
	<-entered
	states := func() (fresh, serving int) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, ci := range f.conns {
			switch {
			case ci.state == http.StateNew:
				fresh++
			case ci.handlers > 0:
				serving++
			}
		}
		return fresh, serving
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if fresh, serving := states(); fresh == 1 && serving == 1 {
			break
		}
		if time.Now().After(deadline) {
			fresh, serving := states()
			t.Fatalf("%d new and %d serving connections, want 1 and 1", fresh, serving)
		}
		runtime.Gosched()
	}

	if n := f.closeReading(); n != 1 {
		t.Fatalf("closeReading closed %d connections, want 1 (the half-sent request)", n)
	}
	close(release)
	if got := <-served; got != "served" {
		t.Fatalf("the request being served got %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Shutdown took %s", d)
	}
	if err := <-serveDone; err != http.ErrServerClosed {
		t.Fatalf("Serve: %v", err)
	}
}
