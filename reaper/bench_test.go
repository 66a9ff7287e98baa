package reaper

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
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
	s := o
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		// As a cycle's collect and sort do, without the listing.
		var matches []match
		for _, p := range pods {
			if m, ok := s.evaluate(p, t0); ok {
				matches = append(matches, m)
			}
		}
		sortMatches(matches, o.Sorting, nil)
		reaped := 0
		for range matches {
			if reaped >= o.MaxPods {
				break
			}
			reaped++
		}
		if reaped != 50 {
			b.Fatalf("reaped %d, want 50 (of %d matches)", reaped, len(matches))
		}
	}
}

// BenchmarkWatchQueue1kPodsTenUpdatesEach measures a WATCH run's changed pods: 1,000 pods
// in the informer's cache, each reported ten times, judged once each as the cache holds them.
//
//	go test -run '^$' -bench BenchmarkWatchQueue1kPodsTenUpdatesEach -benchmem ./reaper/
func BenchmarkWatchQueue1kPodsTenUpdatesEach(b *testing.B) {
	inf := cache.NewSharedIndexInformer(nil, &corev1.Pod{}, 0, cache.Indexers{})
	store := inf.GetStore()
	pods := make([]*corev1.Pod, 1000)
	for i := range pods {
		pods[i] = newPod("shoot", fmt.Sprintf("kcm-%d", i), withLabel("app", "kcm"))
		if err := store.Add(pods[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		w := watchedBatch(inf)
		w.byNS["shoot"] = []int{0}
		for range 10 {
			for _, p := range pods {
				w.podChanged(p)
			}
		}
		n := 0
		for _, key := range w.targets[0].changed.take() {
			if _, ok := w.pods.get(key); ok {
				n++
			}
		}
		w.queue.ShutDown()
		if n != 1000 {
			b.Fatalf("handed %d pods, want 1000", n)
		}
	}
}
