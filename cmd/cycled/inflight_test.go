package main

import (
	"net/http"
	"net/http/httptest"
	"reflect"
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
