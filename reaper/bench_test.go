package reaper

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkCycleSelection10kPods measures one cycle's decisions over 10,000 listed pods:
// filters, rules (CONTAINER_STATUSES AND MAX_DURATION, ~1 in 10 matching), sorting (oldest-
// first) and the MAX_PODS cap. Target: <= 50 ms and <= 20 MB allocated per op.
//
//	go test -run '^$' -bench BenchmarkCycleSelection10kPods -benchmem ./reaper/
func BenchmarkCycleSelection10kPods(b *testing.B) {
	o := mustOptions(b, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff,OOMKilled", "MAX_DURATION": "1h",
		"EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "true",
		"POD_SORTING_STRATEGY": "oldest-first", "MAX_PODS": "50",
	})
	pods := make([]*corev1.Pod, 10_000)
	for i := range pods {
		opts := []podOpt{withLabel("app", fmt.Sprintf("app-%d", i%100)), startedAgo(time.Duration(i) * time.Minute)}
		opts = append(opts, waiting("sidecar", "ContainerCreating"))
		if i%10 == 0 {
			opts = append(opts, crashLooping)
		}
		pods[i] = newPod(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("pod-%d", i), opts...)
	}
	s := &selector{filter: o.filter(), rules: o.Rules}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		matches := s.selectMatches(pods, t0, o.Sorting, nil)
		q := quota{max: o.MaxPods}
		reaped := 0
		for _, m := range matches {
			if q.full() {
				break
			}
			_ = m
			q.take()
			reaped++
		}
		if reaped != 50 {
			b.Fatalf("reaped %d, want 50 (of %d matches)", reaped, len(matches))
		}
	}
}
