package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// jsonLogger is a JSON logger at info level whose output is returned, with klog routed to it.
func jsonLogger(t *testing.T) *bytes.Buffer {
	t.Helper()
	t.Cleanup(klog.ClearLogger)
	log, _, err := newLogger(func(k string) (string, bool) { return map[string]string{"LOG_FORMAT": "json"}[k], k == "LOG_FORMAT" }, false)
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	log.SetOutput(&out)
	return &out.b
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// client-go logs a lost race for the Lease at start-up (two replicas each create it, one is
// told it already exists) at error level; depwatch logs that one as what it is, info, and
// every other Lease error as the error it is.
func TestALostRaceToCreateTheLeaseIsInfoAndOtherLeaseErrorsStayErrors(t *testing.T) {
	exists := apierrors.NewAlreadyExists(leaseResource, "dwd-weeder-leader-election")
	for _, tc := range []struct {
		name      string
		msg       string
		err       error
		wantLevel string
		wantMsg   string
	}{
		{name: "the create lost the race", msg: leaseCreateMessage, err: exists,
			wantLevel: "info", wantMsg: "Another replica created the Lease first"},
		{name: "the create was refused", msg: leaseCreateMessage, err: apierrors.NewForbidden(leaseResource, "dwd-weeder-leader-election", errors.New("RBAC")),
			wantLevel: "error", wantMsg: leaseCreateMessage},
		{name: "the create timed out", msg: leaseCreateMessage, err: apierrors.NewTimeoutError("slow", 1),
			wantLevel: "error", wantMsg: leaseCreateMessage},
		{name: "AlreadyExists from another Lease request", msg: "Failed to update lock", err: exists,
			wantLevel: "error", wantMsg: "Failed to update lock"},
		{name: "no error at all", msg: leaseCreateMessage, wantLevel: "error", wantMsg: leaseCreateMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := jsonLogger(t)
			klog.Background().Error(tc.err, tc.msg, "lock", "garden/dwd-weeder-leader-election")
			lines := jsonLines(t, out.String())
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1:\n%s", len(lines), out)
			}
			l := lines[0]
			if l["level"] != tc.wantLevel || !strings.HasPrefix(l["msg"].(string), tc.wantMsg) || l["lock"] != "garden/dwd-weeder-leader-election" {
				t.Errorf("logged %v, want level %s, a message starting %q and the lock", l, tc.wantLevel, tc.wantMsg)
			}
			if tc.wantLevel == "error" && tc.err != nil && l["error"] != tc.err.Error() {
				t.Errorf("the error is not in the line: %v", l)
			}
		})
	}
}

// The message is client-go's own: its leader election, finding no Lease and then told by the
// API server that another replica created it meanwhile, logs it, and depwatch logs it at info.
func TestClientGosLeaderElectionRaceComesOutAsInfo(t *testing.T) {
	out := jsonLogger(t)
	client := fake.NewClientset()
	client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(leaseResource, "dwd-weeder-leader-election")
	})
	client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewAlreadyExists(leaseResource, "dwd-weeder-leader-election")
	})
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "garden", "dwd-weeder-leader-election",
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: "b"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	created := func() bool {
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" {
				return true
			}
		}
		return false
	}
	for !created() { // the first attempt is made at once; the test's timeout catches a hang
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	var race []map[string]any
	for _, l := range jsonLines(t, out.String()) {
		if l["level"] == "error" {
			t.Errorf("an error-level line: %v", l)
		}
		if strings.HasPrefix(l["msg"].(string), "Another replica created the Lease first") {
			race = append(race, l)
		}
	}
	if len(race) == 0 {
		t.Errorf("the lost race is not logged as info:\n%s", out)
	}
}
