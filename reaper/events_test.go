package reaper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestRunEventsForbiddenIsWarnedOnceAcrossCycles: a scheduled reaper under pod-reaper's RBAC
// (no events create) reaps a fresh pod in every cycle. The first refusal is said once, in one
// warning, and no Event is tried again in any later cycle: a Forbidden is permanent for the
// run, which for a pod-reaper Deployment is the life of the process. Other failures are also
// warned once, but every Event is still tried.
func TestRunEventsForbiddenIsWarnedOnceAcrossCycles(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New(`User "system:serviceaccount:reaper:pod-reaper-service-account" cannot create resource "events"`))
	busy := apierrors.NewServerTimeout(schema.GroupResource{Resource: "events"}, "create", 1)
	cases := []struct {
		name              string
		createErr         error
		wantFirstWarnings int  // "Could not record the ... Event" lines
		wantEveryTried    bool // one create per reaped pod; else exactly one
		wantLastLevel     logrus.Level
	}{
		{"forbidden: warned once, never tried again", forbidden, 1, false, logrus.InfoLevel},
		{"server busy: warned once, every Event tried", busy, 1, true, logrus.WarnLevel},
		{"allowed: no warning, every Event written", nil, 0, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			client := fake.NewClientset()
			// Every cycle lists one new crash-looping pod, as a Deployment's replacement would be.
			var listed atomic.Int64
			client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				n := listed.Add(1)
				return true, &corev1.PodList{Items: []corev1.Pod{*newPod("apps", fmt.Sprintf("victim-%d", n), crashLooping)}}, nil
			})
			client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, nil
			})
			var creates atomic.Int64
			client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
				creates.Add(1)
				if c.createErr != nil {
					return true, nil, c.createErr
				}
				return false, nil, nil
			})
			// A start cycle, then one or two ticks: at least two cycles, each reaping its pod.
			o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "SCHEDULE": "@every 1s", "RUN_DURATION": "1500ms", "REAP_AT_START": "true"})
			log, hook := quietLogger()
			s, err := Run(context.Background(), client, o, log)
			if err != nil || s.Cycles < 2 || s.Reaped != s.Cycles || s.Errors != 0 {
				t.Fatalf("Run = %+v, %v; want every cycle (at least two) to reap its pod", s, err)
			}

			first := 0
			var last *logrus.Entry
			for _, e := range hook.AllEntries() {
				if strings.HasPrefix(e.Message, "Could not record the Reaped Event") {
					first++
					if e.Level != logrus.WarnLevel {
						t.Errorf("the first Event failure is logged at %s, want warning", e.Level)
					}
				}
				if _, ok := e.Data["events_failed"]; ok {
					last = e
				}
			}
			if first != c.wantFirstWarnings {
				t.Errorf("%d lines about a failed Event over %d cycles, want %d", first, s.Cycles, c.wantFirstWarnings)
			}
			wantCreates := int64(1)
			if c.wantEveryTried {
				wantCreates = int64(s.Reaped)
			}
			if got := creates.Load(); got != wantCreates {
				t.Errorf("%d Events sent to the API server for %d reaped pods, want %d", got, s.Reaped, wantCreates)
			}
			switch {
			case c.createErr == nil && last != nil:
				t.Errorf("a count of failed Events although none failed: %s", last.Message)
			case c.createErr != nil && last == nil:
				t.Errorf("no last line counting the Events not written")
			case c.createErr != nil && (last.Level != c.wantLastLevel || last.Data["events_failed"] != int64(s.Reaped)):
				t.Errorf("last line %q at %s with events_failed=%v, want %s with %d", last.Message, last.Level, last.Data["events_failed"], c.wantLastLevel, s.Reaped)
			}
		})
	}
}
