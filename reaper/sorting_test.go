package reaper

import (
	"slices"
	"testing"
	"time"
)

func TestSortMatches(t *testing.T) {
	pods := func() []match {
		return []match{
			{pod: newPod("ns", "no-start-b")},
			{pod: newPod("ns", "young", startedAgo(time.Minute), withAnnotation(podDeletionCostAnnotation, "100"))},
			{pod: newPod("ns", "old", startedAgo(time.Hour), withAnnotation(podDeletionCostAnnotation, "-5"))},
			{pod: newPod("ns", "no-start-a", withAnnotation(podDeletionCostAnnotation, "not-a-number"))},
			{pod: newPod("ns", "middle", startedAgo(10*time.Minute), withAnnotation(podDeletionCostAnnotation, "3"))},
		}
	}
	tests := []struct {
		strategy SortingStrategy
		want     []string
	}{
		{SortListOrder, []string{"middle", "no-start-a", "no-start-b", "old", "young"}},
		{SortOldestFirst, []string{"old", "middle", "young", "no-start-a", "no-start-b"}},
		{SortYoungestFirst, []string{"young", "middle", "old", "no-start-a", "no-start-b"}},
		// missing and unparsable costs are 0; ties by name
		{SortPodDeletionCost, []string{"old", "no-start-a", "no-start-b", "middle", "young"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.strategy), func(t *testing.T) {
			ms := pods()
			sortMatches(ms, tt.strategy, nil)
			if got := names(ms); !slices.Equal(got, tt.want) {
				t.Errorf("order = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("random keeps every pod", func(t *testing.T) {
		ms := pods()
		sortMatches(ms, SortRandom, nil)
		got := names(ms)
		slices.Sort(got)
		if want := []string{"middle", "no-start-a", "no-start-b", "old", "young"}; !slices.Equal(got, want) {
			t.Errorf("random order lost or duplicated pods: %v", got)
		}
	})
}

func names(ms []match) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.pod.Name
	}
	return out
}
